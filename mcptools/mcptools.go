// Package mcptools offers the tools of an MCP (Model Context Protocol)
// server as planexec tools, so a plan may call them through the executor's
// gate like any other tool.
//
// Connect to a server over stdio (Command) or streamable HTTP (URL), give
// Client.Tools to planexec.Config.Tools, and Close the client when the
// executor is done with it. Each tool's arguments are held to the
// inputSchema the server declared (planexec.NewSchemaTool), so a step the
// schema refuses is refused at validation and never reaches the server.
//
// A server's annotations are hints it gives about itself, and they are
// trusted only to ask for more care: a tool is irreversible unless it says
// readOnlyHint true or destructiveHint false. The service's Overrides win
// over the hints, either way.
package mcptools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os/exec"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/planexec/planexec"
)

// Effect says how a tool's effect is classed, overriding its hints.
type Effect int

const (
	// Hinted follows the server's annotations: irreversible unless the
	// tool says readOnlyHint true or destructiveHint false.
	Hinted Effect = iota
	// Reversible makes every step of the tool a plain step.
	Reversible
	// Irreversible makes the tool planexec.Irreversible.
	Irreversible
)

// Override is what the service says of one of a server's tools, whatever
// the server's annotations say.
type Override struct {
	Effect          Effect
	RequireApproval bool     // planexec.RequireApproval; default: false
	KeyArguments    []string // planexec.KeyArguments; default: all arguments
	Skip            bool     // the tool is not offered at all
}

// Option configures a Client.
type Option func(*config)

type config struct {
	prefix     string
	filter     func(name string) bool
	overrides  map[string]Override
	maxOutcome int
	httpClient *http.Client
	progress   func(Progress)
	grace      time.Duration
}

// DefaultMaxOutcome is the largest outcome of a call, as JSON, in bytes.
const DefaultMaxOutcome = 64 << 10

// Prefix is put before each tool's name as plans write it ("crm_" makes
// "search" crm_search), so two servers' tools cannot collide in one
// executor. Default: none.
func Prefix(p string) Option { return func(c *config) { c.prefix = p } }

// Filter offers only the tools keep says yes to, by the server's name.
// Default: every tool.
func Filter(keep func(name string) bool) Option { return func(c *config) { c.filter = keep } }

// Overrides sets what the service says of tools, by the server's name;
// they win over the server's annotations.
func Overrides(o map[string]Override) Option {
	return func(c *config) {
		if c.overrides == nil {
			c.overrides = map[string]Override{}
		}
		for k, v := range o {
			c.overrides[k] = v
		}
	}
}

// MaxOutcome bounds a call's outcome, as JSON, in bytes: a larger one
// fails the step with an *OutcomeTooLargeError. Default: DefaultMaxOutcome.
func MaxOutcome(n int) Option { return func(c *config) { c.maxOutcome = n } }

// HTTPClient is the client URL connects with. Default: a client of its
// own, whose idle connections Close closes.
func HTTPClient(h *http.Client) Option { return func(c *config) { c.httpClient = h } }

// Grace is how long Close waits for a server started by Command to exit
// once its stdin is closed, before it terminates it (SIGTERM, then, after
// as long again, SIGKILL). Default: 5s.
func Grace(d time.Duration) Option { return func(c *config) { c.grace = d } }

// OnProgress is called with each progress notification the server sends
// for a call a step made. Default: progress is not asked for.
func OnProgress(f func(Progress)) Option { return func(c *config) { c.progress = f } }

// Progress is one progress notification of a call.
type Progress struct {
	Step            planexec.StepInfo // the step whose call it is
	Progress, Total float64           // Total is 0 when the server does not know it
}

// ToolError is a call the server answered with isError true: the tool
// failed, as the server says. Text is what it said, at most 1 KiB of it.
type ToolError struct {
	Tool string // the tool's name as plans write it
	Text string
}

func (e *ToolError) Error() string {
	return fmt.Sprintf("mcptools: tool %q reported an error: %s", e.Tool, e.Text)
}

// OutcomeTooLargeError is a call whose outcome was larger than MaxOutcome.
// The call was made: for an irreversible tool the step is in doubt.
type OutcomeTooLargeError struct {
	Tool      string
	Size, Max int
}

func (e *OutcomeTooLargeError) Error() string {
	return fmt.Sprintf("mcptools: tool %q returned %d bytes, more than the %d allowed; raise MaxOutcome to take it", e.Tool, e.Size, e.Max)
}

// Client is a connection to one MCP server and the tools it offers. It is
// long-lived and safe to share between executors and runs; Close ends it.
type Client struct {
	session   *mcp.ClientSession
	tools     []*planexec.Tool
	transport *http.Transport // closed by Close, when the client made it

	mu       sync.Mutex
	progress map[string]planexec.StepInfo // by progress token
	token    int64
}

// Command starts cmd, an MCP server speaking over its stdin and stdout,
// and connects to it. Close ends the process.
func Command(ctx context.Context, cmd *exec.Cmd, opts ...Option) (*Client, error) {
	cfg := configure(opts)
	return connect(ctx, &mcp.CommandTransport{Command: cmd, TerminateDuration: cfg.grace}, cfg)
}

// URL connects to the MCP server at url over streamable HTTP.
func URL(ctx context.Context, url string, opts ...Option) (*Client, error) {
	cfg := configure(opts)
	t := &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: cfg.httpClient}
	var own *http.Transport
	if t.HTTPClient == nil {
		own = http.DefaultTransport.(*http.Transport).Clone()
		t.HTTPClient = &http.Client{Transport: own}
	}
	c, err := connect(ctx, t, cfg)
	if err != nil {
		if own != nil {
			own.CloseIdleConnections()
		}
		return nil, err
	}
	c.transport = own
	return c, nil
}

// Connect connects over t, any MCP transport, and lists the server's tools
// (every page of them). It returns an error naming the tool when a tool's
// inputSchema cannot be held to (skip it with an Override) or two tools
// would have the same name.
func Connect(ctx context.Context, t mcp.Transport, opts ...Option) (*Client, error) {
	return connect(ctx, t, configure(opts))
}

func configure(opts []Option) *config {
	cfg := &config{maxOutcome: DefaultMaxOutcome}
	for _, o := range opts {
		o(cfg)
	}
	if cfg.maxOutcome <= 0 {
		cfg.maxOutcome = DefaultMaxOutcome
	}
	return cfg
}

func connect(ctx context.Context, t mcp.Transport, cfg *config) (*Client, error) {
	c := &Client{progress: map[string]planexec.StepInfo{}}
	opts := &mcp.ClientOptions{Logger: slog.New(slog.DiscardHandler)}
	if cfg.progress != nil {
		opts.ProgressNotificationHandler = func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			tok, _ := req.Params.ProgressToken.(string)
			c.mu.Lock()
			info, ok := c.progress[tok]
			c.mu.Unlock()
			if ok {
				cfg.progress(Progress{Step: info, Progress: req.Params.Progress, Total: req.Params.Total})
			}
		}
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "planexec", Version: "v1"}, opts)
	session, err := client.Connect(ctx, t, nil)
	if err != nil {
		return nil, fmt.Errorf("mcptools: connecting to the server: %w", err)
	}
	c.session = session
	if err := c.list(ctx, cfg); err != nil {
		return nil, errors.Join(err, session.Close())
	}
	return c, nil
}

// list offers each of the server's tools, every page of them.
func (c *Client) list(ctx context.Context, cfg *config) error {
	seen := map[string]bool{}
	for mt, err := range c.session.Tools(ctx, nil) {
		if err != nil {
			return fmt.Errorf("mcptools: listing the server's tools: %w", err)
		}
		o := cfg.overrides[mt.Name]
		if o.Skip || (cfg.filter != nil && !cfg.filter(mt.Name)) {
			continue
		}
		name := cfg.prefix + mt.Name
		if seen[name] {
			return fmt.Errorf("mcptools: the server lists tool %q twice", name)
		}
		seen[name] = true
		t, err := c.offer(mt, name, o, cfg.maxOutcome, cfg.progress != nil)
		if err != nil {
			return err
		}
		c.tools = append(c.tools, t)
	}
	return nil
}

// irreversible reads a tool's hints: only readOnlyHint true or
// destructiveHint false make it reversible.
func irreversible(a *mcp.ToolAnnotations) bool {
	if a == nil {
		return true
	}
	return !a.ReadOnlyHint && (a.DestructiveHint == nil || *a.DestructiveHint)
}

// offer builds the planexec tool of mt, named name.
func (c *Client) offer(mt *mcp.Tool, name string, o Override, maxOutcome int, progress bool) (*planexec.Tool, error) {
	schema, err := json.Marshal(mt.InputSchema)
	if err != nil {
		return nil, fmt.Errorf("mcptools: the inputSchema of tool %q cannot be read: %w", name, err)
	}
	var opts []planexec.ContractOption
	if o.Effect == Irreversible || (o.Effect == Hinted && irreversible(mt.Annotations)) {
		opts = append(opts, planexec.Irreversible())
	}
	if o.RequireApproval {
		opts = append(opts, planexec.RequireApproval())
	}
	if len(o.KeyArguments) > 0 {
		opts = append(opts, planexec.KeyArguments(o.KeyArguments...))
	}
	remote := mt.Name
	call := func(ctx context.Context, args json.RawMessage) (json.RawMessage, error) {
		params := &mcp.CallToolParams{Name: remote, Arguments: args}
		if progress {
			tok, done := c.follow(ctx)
			defer done()
			params.SetProgressToken(tok)
		}
		res, err := c.session.CallTool(ctx, params)
		if err != nil {
			return nil, fmt.Errorf("mcptools: calling tool %q: %w", name, err)
		}
		if res.IsError {
			return nil, &ToolError{Tool: name, Text: errorText(res.Content)}
		}
		var out []byte
		if res.StructuredContent != nil {
			out, err = json.Marshal(res.StructuredContent)
		} else {
			if res.Content == nil {
				res.Content = []mcp.Content{}
			}
			out, err = json.Marshal(res.Content)
		}
		if err != nil {
			return nil, fmt.Errorf("mcptools: the result of tool %q cannot be rendered as JSON: %w", name, err)
		}
		if len(out) > maxOutcome {
			return nil, &OutcomeTooLargeError{Tool: name, Size: len(out), Max: maxOutcome}
		}
		return out, nil
	}
	return planexec.NewSchemaTool(name, mt.Description, schema, call, opts...)
}

// follow registers a progress token for the step ctx carries; done
// forgets it.
func (c *Client) follow(ctx context.Context) (token string, done func()) {
	info, _ := planexec.CurrentStep(ctx)
	c.mu.Lock()
	c.token++
	token = fmt.Sprintf("planexec-%d", c.token)
	c.progress[token] = info
	c.mu.Unlock()
	return token, func() {
		c.mu.Lock()
		delete(c.progress, token)
		c.mu.Unlock()
	}
}

// maxErrorText bounds the text of a ToolError.
const maxErrorText = 1 << 10

// errorText is the text a failed call's content says, bounded.
func errorText(content []mcp.Content) string {
	var b strings.Builder
	for _, ct := range content {
		if tc, ok := ct.(*mcp.TextContent); ok {
			if b.Len() > 0 {
				b.WriteString(" ")
			}
			b.WriteString(tc.Text)
			if b.Len() >= maxErrorText {
				break
			}
		}
	}
	s := b.String()
	if len(s) <= maxErrorText {
		return s
	}
	s = s[:maxErrorText]
	for !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s + "…"
}

// Tools are the server's tools, as listed when the client connected, in
// the server's order.
func (c *Client) Tools() []*planexec.Tool { return append([]*planexec.Tool(nil), c.tools...) }

// Close ends the session: a server started by Command is stopped (its
// stdin closed, then, if it lingers, terminated; see Grace), and how it
// exited is not Close's error. A step calling one of its tools fails.
func (c *Client) Close() error {
	err := c.session.Close()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		err = nil
	}
	if c.transport != nil {
		c.transport.CloseIdleConnections()
	}
	return err
}
