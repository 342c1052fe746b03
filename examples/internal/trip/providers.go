//go:build providers

package trip

import (
	"github.com/planexec/planexec/llm"
	"github.com/planexec/planexec/llm/anthropic"
	"github.com/planexec/planexec/llm/openai"
)

// The provider adapters are compiled in only with -tags providers; the
// examples start that build by themselves when -model names a provider
// whose key is set.
func init() {
	providerModel = func(provider, name string) (llm.Model, error) {
		if provider == "anthropic" {
			return anthropic.New(name)
		}
		return openai.New(name)
	}
}
