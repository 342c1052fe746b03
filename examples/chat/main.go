// Command chat is a conversation with the planner in the browser, over a
// small issue tracker: the planner reads the tracker as it talks, and
// changes it only by proposing a plan that a person applies, in whole or in
// part, or rejects.
//
//	go run ./examples/chat                           # http://127.0.0.1:8081/, sign-in links printed
//	go run ./examples/chat -addr 127.0.0.1:9000
//	go run ./examples/chat -tokens tokens.txt        # person=token lines
//	go run ./examples/chat -addr :8081 -host chat.example.com
//	go run ./examples/chat -model openai:MODEL       # with OPENAI_API_KEY (and OPENAI_BASE_URL)
//	go run ./examples/chat -model anthropic:MODEL    # with ANTHROPIC_API_KEY
//
// The tools: list_items and get_item read (permission tracker.read), and the
// planner calls them itself; create_item, update_item and add_dependency
// write (tracker.write), and run only in a plan a person applied. Two people
// share the tracker: ana may read and write, ben may only read; each is a
// delegation whose scope lists the tools their permissions allow. Asked by
// ben, the planner can read but not propose; a plan ana's planner proposed,
// ben cannot apply.
//
// Each person has a token: from the -tokens file, or made at start and
// printed. A client that is no browser sends it (Authorization: Bearer). A
// browser signs in once, with a one-time link printed at start or with the
// token, and gets a cookie (HttpOnly, SameSite=Strict) in exchange. The
// service answers only to its own host names (the listen address, and
// -host), refuses what a page of another origin sends to change anything,
// and bounds what a client may hold: see httpServer and chathttp.Config.
//
// The page is the HTTP API of package chat/chathttp under /api, and a
// transcript that follows the session's event stream (Server-Sent Events):
// tool calls and results show as they happen, a proposal as a card whose
// steps can be picked, and once applied, what each step did.
//
// With no model configured it talks with a scripted model (no key, no
// network): ask it to "plan items for design review and launch checklist",
// or "what is open?". The provider adapters are not compiled into the
// default build: with -model and the provider's key set, the command builds
// itself again with them (-tags providers) and hands over.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/planexec/planexec/examples/internal/trip"
)

// tenant is the demo's one team: ana and ben share its sessions and
// tracker.
const tenant = "demo"

// instructions tell the planner about the service.
const instructions = `This is a team's issue tracker. Items have ids like T-1, a title, a status (open, in_progress, done), an assignee and the items they wait for. Read the tracker before proposing changes, and propose only what the person asked for.`

func main() {
	addr := flag.String("addr", "127.0.0.1:8081", "address to listen on")
	spec := flag.String("model", "", "talk with openai:MODEL (OPENAI_API_KEY, OPENAI_BASE_URL) or anthropic:MODEL (ANTHROPIC_API_KEY); default: the scripted model")
	tokensFile := flag.String("tokens", "", "a file of person=token lines, the people's tokens; default: made at start and printed")
	hosts := flag.String("host", "", "more host names clients use (comma-separated, name or name:port), besides the listen address")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	err := run(ctx, *addr, *spec, *tokensFile, *hosts)
	if errors.Is(err, trip.ErrNeedsProviders) {
		err = withProviders(ctx)
	}
	if err != nil {
		stop()
		log.Fatal(err)
	}
}

// run serves the page and its API on addr until ctx ends.
func run(ctx context.Context, addr, spec, tokensFile, hosts string) error {
	model, err := chooseModel(spec, func(line string) { log.Print(line) })
	if err != nil {
		return err
	}
	tokens, made := newTokens(), true
	if tokensFile != "" {
		if tokens, err = tokensIn(tokensFile); err != nil {
			return err
		}
		made = false
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	var extra []string
	for _, h := range strings.Split(hosts, ",") {
		if h = strings.TrimSpace(h); h != "" {
			extra = append(extra, h)
		}
	}
	srv, err := newServer(model, newTracker(), options{tokens: tokens, hosts: hostsOf(ln.Addr(), extra)})
	if err != nil {
		ln.Close()
		return err
	}
	base := "http://" + ln.Addr().String()
	if tcp, ok := ln.Addr().(*net.TCPAddr); ok && tcp.IP.IsUnspecified() {
		base = "http://" + net.JoinHostPort("localhost", strconv.Itoa(tcp.Port))
	}
	fmt.Printf("chat with the planner on %s/\n", base)
	for _, person := range srv.access.persons() {
		fmt.Printf("sign in as %s (one time, within %v): %s/signin?code=%s\n", person, linkLife, base, srv.access.link(person))
	}
	if made {
		fmt.Println("tokens made for this run (Authorization: Bearer TOKEN, or the sign-in page):")
		for _, person := range srv.access.persons() {
			fmt.Printf("  %s=%s\n", person, tokens[person])
		}
	}

	// Event streams never go idle: ending the requests' context ends them,
	// so that shutdown need not wait for the browsers to leave.
	reqs, endRequests := context.WithCancel(context.WithoutCancel(ctx))
	defer endRequests()
	hs := httpServer(srv, reqs)
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	select {
	case <-ctx.Done():
	case err = <-served:
		return err
	}
	endRequests()
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	_ = hs.Shutdown(sctx)
	<-served
	return srv.Close(sctx)
}

// tokensIn reads the people's tokens from the file at path.
func tokensIn(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	tokens, err := readTokens(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return tokens, nil
}
