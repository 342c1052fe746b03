package mcptools_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/planexec/planexec"
	"github.com/planexec/planexec/mcptools"
)

// An MCP server's tools offered to an executor: here a server in the same
// process, over streamable HTTP; mcptools.Command starts one over stdio.
func Example() {
	ctx := context.Background()
	srv := httptest.NewServer(greeter())
	defer srv.Close()

	mcpc, err := mcptools.URL(ctx, srv.URL, mcptools.Prefix("greeter_"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer mcpc.Close()

	ex, err := planexec.NewExecutor(planexec.Config{Tools: mcpc.Tools()})
	if err != nil {
		fmt.Println(err)
		return
	}
	run, err := ex.Run(planexec.Delegation{RunID: "run-1", Tenant: "acme", User: "dana", Agent: "courier"})
	if err != nil {
		fmt.Println(err)
		return
	}
	res, err := run.Execute(ctx, planexec.Plan{Goal: "greet Dana", Steps: []planexec.Step{
		{ID: "s1", Tool: "greeter_greet", Arguments: json.RawMessage(`{"name":"Dana"}`)},
	}})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(string(res.Steps["s1"].Outcome))
	// Output: [{"type":"text","text":"Hello, Dana."}]
}

// greeter is an MCP server with one read-only tool.
func greeter() http.Handler {
	s := mcp.NewServer(&mcp.Implementation{Name: "greeter", Version: "v0"}, nil)
	s.AddTool(&mcp.Tool{
		Name:        "greet",
		Description: "Greet someone by name.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"name":{"type":"string"}},"required":["name"],"additionalProperties":false}`),
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
	}, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var args struct{ Name string }
		if err := json.Unmarshal(req.Params.Arguments, &args); err != nil {
			return nil, err
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "Hello, " + args.Name + "."}}}, nil
	})
	return mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)
}
