package main

import (
	"context"
	"embed"
	"encoding/json"
	"html/template"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/planexec/planexec"
	"github.com/planexec/planexec/chat"
	"github.com/planexec/planexec/chat/chathttp"
	"github.com/planexec/planexec/llm"
	"github.com/planexec/planexec/store/memory"
)

//go:embed page.html page.js page.css
var assets embed.FS

//go:embed signin.html
var signinHTML string

var signinPage = template.Must(template.New("signin").Parse(signinHTML))

// securityPolicy is every response's Content-Security-Policy: the page's
// own script and style only, nothing inline, no frame may hold it, and its
// forms post only to it.
const securityPolicy = "default-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'; object-src 'none'"

// options shape the service.
type options struct {
	// tokens are the people's tokens, person → token.
	tokens map[string]string
	// hosts are the names clients reach the service by: "name" (on any
	// port) or "name:port". A request for any other is refused.
	hosts []string
}

// server is the page, the chat's API under /api, the tracker's items under
// /items, and signing in and out.
type server struct {
	http.Handler
	chat   *chat.Chat
	access *access
}

// newServer builds the service over items, talking with model: one store
// in memory for the sessions and the applied plans, the read tools for the
// planner, and an engine holding every tool for the plans people apply.
func newServer(model llm.Model, items *tracker, o options) (*server, error) {
	a, err := newAccess(o.tokens)
	if err != nil {
		return nil, err
	}
	st := memory.New()
	reads := items.reads()
	engine, err := planexec.NewExecutor(planexec.Config{Tools: slices.Concat(reads, items.writes()), Store: st})
	if err != nil {
		return nil, err
	}
	c, err := chat.New(chat.Config{Model: model, Store: st, Reads: reads, Engine: engine, Instructions: instructions,
		MaxMessageRunes: 10_000,
		// One process: what it writes wakes its watchers at once, so the
		// store is asked only for what no process here wrote.
		PollInterval: 5 * time.Second})
	if err != nil {
		return nil, err
	}
	// One protection for the whole site: the API's POSTs, and signing in
	// and out (a page of another site must not sign a browser in either).
	cop := http.NewCrossOriginProtection()
	cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusForbidden, "cross_origin", "A request from a page of another origin may not change anything here.")
	}))
	api := chathttp.New(c, chathttp.Config{Authenticate: a.authenticate, CrossOrigin: cop,
		MaxBodyBytes: 64 << 10, MaxStreams: 256, MaxStreamsPerPerson: 8})

	mux := http.NewServeMux()
	mux.Handle("/api/", http.StripPrefix("/api", api))
	mux.HandleFunc("GET /items", func(w http.ResponseWriter, r *http.Request) {
		if _, err := a.authenticate(r); err != nil {
			writeError(w, http.StatusUnauthorized, "unauthenticated", "The request is not authenticated.")
			return
		}
		list, _ := items.list(r.Context(), ListItems{})
		writeJSON(w, list)
	})
	mux.HandleFunc("GET /me", func(w http.ResponseWriter, r *http.Request) {
		person, err := a.authenticate(r)
		if err != nil {
			writeError(w, http.StatusUnauthorized, "unauthenticated", "The request is not authenticated.")
			return
		}
		writeJSON(w, map[string]any{"person": person.User, "scope": person.Scope})
	})
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		if _, err := a.authenticate(r); err != nil {
			http.Redirect(w, r, "/signin", http.StatusSeeOther)
			return
		}
		serveAsset(w, r, "page.html", "text/html; charset=utf-8")
	})
	mux.HandleFunc("GET /page.js", func(w http.ResponseWriter, r *http.Request) {
		serveAsset(w, r, "page.js", "text/javascript; charset=utf-8")
	})
	mux.HandleFunc("GET /page.css", func(w http.ResponseWriter, r *http.Request) {
		serveAsset(w, r, "page.css", "text/css; charset=utf-8")
	})
	mux.HandleFunc("GET /signin", func(w http.ResponseWriter, r *http.Request) {
		signInPage(w, http.StatusOK, r.URL.Query().Get("code"), "")
	})
	mux.HandleFunc("POST /signin", a.signIn)
	mux.HandleFunc("POST /signout", a.signOut)
	return &server{Handler: secured(onlyHosts(o.hosts, cop.Handler(mux))), chat: c, access: a}, nil
}

// Close stops the turns under way and waits for them, or for ctx.
func (s *server) Close(ctx context.Context) error { return s.chat.Close(ctx) }

// httpServer serves h with bounds on what a client may hold: the time to
// send a request's header and the whole request, the time to write an
// answer (an event stream sets its own for each event), an idle
// connection's life, and the header's size. Requests' contexts come from
// base.
func httpServer(h http.Handler, base context.Context) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      60 * time.Second,
		IdleTimeout:       60 * time.Second,
		MaxHeaderBytes:    16 << 10,
		BaseContext:       func(net.Listener) context.Context { return base },
	}
}

// secured gives every answer the headers that keep a browser from framing
// the page, sniffing a type, or telling another site where it was.
func secured(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", securityPolicy)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cross-Origin-Opener-Policy", "same-origin")
		h.Set("Cross-Origin-Resource-Policy", "same-origin")
		next.ServeHTTP(w, r)
	})
}

// onlyHosts answers 421 to a request for a host name not in hosts: a name
// of someone else's that resolves to this address (DNS rebinding) gets
// nothing of the service.
func onlyHosts(hosts []string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !hostAllowed(hosts, r.Host) {
			writeError(w, http.StatusMisdirectedRequest, "wrong_host", "This service does not answer to that host name.")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// hostAllowed reports whether host (a request's, name or name:port) is one
// of hosts.
func hostAllowed(hosts []string, host string) bool {
	name, _, err := net.SplitHostPort(host)
	if err != nil {
		name = host
	}
	for _, h := range hosts {
		if strings.EqualFold(h, host) {
			return true
		}
		if _, _, err := net.SplitHostPort(h); err != nil && strings.EqualFold(strings.Trim(h, "[]"), name) {
			return true // a name given without a port
		}
	}
	return false
}

// hostsOf are the names clients reach a listener on addr by: the address
// itself, and localhost on a loopback or unspecified one; and extra.
func hostsOf(addr net.Addr, extra []string) []string {
	hosts := slices.Clone(extra)
	tcp, ok := addr.(*net.TCPAddr)
	if !ok {
		return append(hosts, addr.String())
	}
	port := tcp.AddrPort().Port()
	at := func(name string) string { return net.JoinHostPort(name, strconv.Itoa(int(port))) }
	switch {
	case tcp.IP.IsUnspecified():
		hosts = append(hosts, at("localhost"), at("127.0.0.1"), at("::1"))
	case tcp.IP.IsLoopback():
		hosts = append(hosts, tcp.String(), at("localhost"))
	default:
		hosts = append(hosts, tcp.String())
	}
	return hosts
}

// serveAsset serves one of the page's files.
func serveAsset(w http.ResponseWriter, r *http.Request, name, contentType string) {
	b, err := assets.ReadFile(name)
	if err != nil {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", contentType)
	w.Header().Set("Cache-Control", "no-cache")
	_, _ = w.Write(b)
}

// signInPage shows the sign-in form: a one-time link's button, or the
// token's field; problem says what went wrong before.
func signInPage(w http.ResponseWriter, status int, code, problem string) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = signinPage.Execute(w, struct{ Code, Problem string }{code, problem})
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(v)
}

// writeError answers as the chat's API does: {"error": {"code", "message"}}.
func writeError(w http.ResponseWriter, status int, code, message string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]map[string]string{"error": {"code": code, "message": message}})
}
