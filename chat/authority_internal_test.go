package chat

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/planexec/planexec"
)

func TestASummaryOfMoreSourcesThanItListsIsSentOnlyForItsPerson(t *testing.T) {
	reads := func(n int) []Output {
		out := make([]Output, n)
		for i := range out {
			out[i] = Output{Kind: KindToolResult, Source: &Source{By: "cy", Steps: []Step{{ID: "call", Tool: "get_item", Arguments: json.RawMessage(fmt.Sprintf(`{"id":"T-%d"}`, i))}}}}
		}
		return out
	}
	for _, tc := range []struct {
		reads    int
		unlisted bool
	}{{MaxSummarySources, false}, {MaxSummarySources + 1, true}} {
		sources, unlisted := sourcesOf(nil, reads(tc.reads))
		if unlisted != tc.unlisted || (unlisted && sources != nil) || (!unlisted && len(sources) != tc.reads) {
			t.Fatalf("%d reads: %d sources, unlisted %v", tc.reads, len(sources), unlisted)
		}
		// A summary over an unlisted one is unlisted too.
		if _, again := sourcesOf(&Summary{Unlisted: unlisted}, nil); again != unlisted {
			t.Fatalf("%d reads: the next summary's unlisted = %v", tc.reads, again)
		}
	}
	sum := &Summary{For: "cy", Unlisted: true}
	for _, tc := range []struct {
		user   string
		usable bool
	}{{"cy", true}, {"ben", false}} {
		tr := &turn{person: planexec.Delegation{Tenant: "acme", User: tc.user}}
		if got := tr.usable(sum); got != tc.usable {
			t.Errorf("an unlisted summary made for cy, for %s: usable = %v", tc.user, got)
		}
	}
}
