//go:build providers

package main

import (
	"github.com/planexec/planexec/llm"
	"github.com/planexec/planexec/llm/anthropic"
	"github.com/planexec/planexec/llm/openai"
)

// The provider adapters are compiled in only with -tags providers: the
// default build (the scripted model) does not wait for their SDKs to build.
// main.go starts this build by itself when -model names a provider whose key
// is set.
func init() {
	newProviderModel = func(provider, name string) (llm.Model, error) {
		if provider == "anthropic" {
			return anthropic.New(name)
		}
		return openai.New(name)
	}
}
