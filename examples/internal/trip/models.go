package trip

import (
	"fmt"
	"os"
	"strings"

	"github.com/planexec/planexec/llm"
)

// providerModel builds a provider's model. It is nil unless the program was
// built with -tags providers (providers.go): the default build does not wait
// for the providers' SDKs.
var providerModel func(provider, name string) (llm.Model, error)

// ChooseModel returns the model spec names ("openai:MODEL",
// "anthropic:MODEL"), or the stand-in (Model(refuseFirst)) when spec is
// empty or the provider's key is not set; say is told, in one line, which
// it is. A provider whose key is set, in a build without the adapters, is
// ErrNeedsProviders.
func ChooseModel(spec string, refuseFirst bool, say func(string)) (llm.Model, error) {
	provider, name, _ := strings.Cut(spec, ":")
	key := providerKeys[provider]
	switch {
	case spec == "":
		say("model: scripted (no provider configured; no key, no network)")
	case key == "" || name == "":
		return nil, fmt.Errorf("-model %q: want openai:MODEL or anthropic:MODEL", spec)
	case os.Getenv(key) == "":
		say(fmt.Sprintf("model: scripted (%s is not set, so -model %s is not used)", key, spec))
	case providerModel == nil:
		return nil, ErrNeedsProviders
	default:
		say(fmt.Sprintf("model: %s via %s", name, map[string]string{"openai": "the OpenAI-compatible API", "anthropic": "the Anthropic API"}[provider]))
		return providerModel(provider, name)
	}
	return Model(refuseFirst), nil
}

// providerKeys are the providers' environment variables holding their keys.
var providerKeys = map[string]string{"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY"}

// wantsProvider reports whether spec names a provider's model and the
// provider's key is set: what ChooseModel needs the adapters for.
func wantsProvider(spec string) bool {
	provider, name, _ := strings.Cut(spec, ":")
	key := providerKeys[provider]
	return key != "" && name != "" && os.Getenv(key) != ""
}

// ProvidersCompiledIn reports whether the program was built with the
// provider adapters.
func ProvidersCompiledIn() bool { return providerModel != nil }
