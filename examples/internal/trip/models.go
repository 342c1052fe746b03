package trip

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/planexec/planexec/llm"
)

// providerModel builds a provider's model. It is nil unless the program was
// built with -tags providers (providers.go): the default build does not wait
// for the providers' SDKs.
var providerModel func(provider, name string) (llm.Model, error)

// ErrNeedsProviders says the program must be built again with -tags
// providers to use the model it was asked for.
var ErrNeedsProviders = errors.New("the provider adapters are not compiled in")

// ChooseModel returns the model spec names ("openai:MODEL",
// "anthropic:MODEL"), or the stand-in (Model(refuseFirst)) when spec is
// empty or the provider's key is not set; say is told, in one line, which
// it is. A provider whose key is set, in a build without the adapters, is
// ErrNeedsProviders.
func ChooseModel(spec string, refuseFirst bool, say func(string)) (llm.Model, error) {
	provider, name, _ := strings.Cut(spec, ":")
	key := map[string]string{"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY"}[provider]
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

// ProvidersCompiledIn reports whether the program was built with the
// provider adapters.
func ProvidersCompiledIn() bool { return providerModel != nil }

// WithProviders builds the command whose package is in dir again with the
// provider adapters (-tags providers) and runs it with this process's
// arguments and standard streams until it exits; a signal that ends ctx is
// passed on to it as SIGTERM, so it shuts down as it would on its own.
func WithProviders(ctx context.Context, dir string) error {
	tmp, err := os.MkdirTemp("", "planexec-"+filepath.Base(dir)+"-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	bin := filepath.Join(tmp, filepath.Base(dir))
	log.Print("building with the provider adapters (go build -tags providers); the first build takes a while")
	build := exec.CommandContext(ctx, "go", "build", "-tags", "providers", "-o", bin, ".")
	build.Dir = dir
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		return fmt.Errorf("building with the provider adapters: %w", err)
	}
	cmd := exec.CommandContext(ctx, bin, os.Args[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	if err := cmd.Run(); err != nil && ctx.Err() == nil {
		return err
	}
	return nil
}
