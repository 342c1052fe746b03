package plannerapi_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/planexec/planexec/store/memory"
)

// tools is a "tools" member of n tools, each with description and
// parameters as given.
func tools(n int, description, parameters string) string {
	list := make([]string, n)
	for i := range list {
		list[i] = fmt.Sprintf(`{"type":"function","function":{"name":"t%d","description":%q,"parameters":%s}}`, i, description, parameters)
	}
	return `,"tools":[` + strings.Join(list, ",") + `]`
}

// A request passes at most 128 tools, as OpenAI takes, each of a bounded
// description and schema: past a bound it is 400 naming the tool, before
// anything is planned.
func TestTheToolsARequestPassesAreBounded(t *testing.T) {
	d := newDesk(t, memory.New())
	hs := d.serve(t, searchRound)
	const params = `{"type":"object","properties":{"x":{"type":"string"}}}`
	bigSchema := `{"type":"object","description":"` + strings.Repeat("x", 17<<10) + `","properties":{}}`
	for _, tc := range []struct {
		name, tools string
		status      int
		param       string
	}{
		{"128 tools", tools(128, "A tool.", params), 200, ""},
		{"129 tools", tools(129, "A tool.", params), 400, "tools"},
		{"a long description", tools(1, strings.Repeat("d", 5<<10), params), 400, "tools[0].function.description"},
		{"large parameters", tools(1, "A tool.", bigSchema), 400, "tools[0].function.parameters"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := len(d.model.Requests())
			r := post(t, hs, "alice", "s-"+strings.ReplaceAll(tc.name, " ", "-"), ask1, tc.tools)
			param := ""
			if r.Error.Param != nil {
				param = *r.Error.Param
			}
			if r.status != tc.status || param != tc.param {
				t.Errorf("%d (param %q), want %d (param %q)", r.status, param, tc.status, tc.param)
			}
			if tc.status != 200 && len(d.model.Requests()) != before {
				t.Error("the model was asked for a plan")
			}
		})
	}
}
