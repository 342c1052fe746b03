package main

import (
	"encoding/json"
	"net"
	"net/http"
	"strings"
)

// hostCheck serves a request only if its Host header names an IP address,
// localhost (or a name under .localhost), the name the server listens on,
// or one of the names it was given (-hosts); it refuses the rest (403). A
// web page of another site whose name was made to resolve to this server's
// address (DNS rebinding) sends that site's name as its Host, so its
// requests are refused; an IP address or localhost cannot be rebound. (Vite
// checks the same by default.)
type hostCheck struct {
	names map[string]bool
	next  http.Handler
}

// checkHost wraps next in a hostCheck that knows addr's host (when it is a
// name) and names.
func checkHost(addr string, names []string, next http.Handler) *hostCheck {
	h := &hostCheck{names: map[string]bool{"localhost": true}, next: next}
	if host, _, err := net.SplitHostPort(addr); err == nil && host != "" {
		h.names[hostname(host)] = true
	}
	for _, n := range names {
		if n = hostname(strings.TrimSpace(n)); n != "" {
			h.names[n] = true
		}
	}
	return h
}

// hostname is host without a port, brackets or a final dot, in lower case.
func hostname(host string) string {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	return strings.ToLower(strings.TrimSuffix(host, "."))
}

// answersFor reports whether the server answers for host, a Host header.
func (h *hostCheck) answersFor(host string) bool {
	name := hostname(host)
	return net.ParseIP(name) != nil || h.names[name] || strings.HasSuffix(name, ".localhost")
}

func (h *hostCheck) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if h.answersFor(r.Host) {
		h.next.ServeHTTP(w, r)
		return
	}
	// OpenAI's error shape, as plannerapi answers; the Host is not echoed.
	var body struct {
		Error struct {
			Message string  `json:"message"`
			Type    string  `json:"type"`
			Param   *string `json:"param"`
			Code    string  `json:"code"`
		} `json:"error"`
	}
	body.Error.Message = "The request's Host header names a host this server does not answer for: use its address, localhost, or a name it was started with (-hosts)."
	body.Error.Type, body.Error.Code = "invalid_request_error", "invalid_host"
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusForbidden)
	_ = json.NewEncoder(w).Encode(body)
}
