package main

import (
	"bufio"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"maps"
	"mime"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/planexec/planexec"
)

// How long a sign-in link and a browser's sign-in last.
const (
	linkLife   = time.Hour
	cookieLife = 12 * time.Hour
	cookieName = "chat"
	// minToken is the shortest token a -tokens file may give.
	minToken = 16
)

// access says who a request is: a client that is no browser sends its
// person's token (Authorization: Bearer), a browser the cookie it got by
// signing in, with a one-time link or the token, on the sign-in page. Only
// hashes are kept, and tokens are compared in constant time.
type access struct {
	tokens map[string][sha256.Size]byte // person → their token's hash
	now    func() time.Time

	mu      sync.Mutex
	links   map[[sha256.Size]byte]grant // one-time sign-in codes
	cookies map[[sha256.Size]byte]grant // browsers signed in
}

// grant is who a link or a cookie is for, and until when.
type grant struct {
	person string
	until  time.Time
}

var (
	errNotSignedIn = errors.New("no token and no sign-in cookie")
	errBadToken    = errors.New("the token is no person's")
	errBadCookie   = errors.New("the sign-in cookie is unknown or expired")
)

// newAccess keeps the people's tokens, person → token; each person must be
// one of the demo's people, with a token of their own: a token two people
// shared would sign in as either.
func newAccess(tokens map[string]string) (*access, error) {
	a := &access{tokens: map[string][sha256.Size]byte{}, now: time.Now,
		links: map[[sha256.Size]byte]grant{}, cookies: map[[sha256.Size]byte]grant{}}
	owner := map[[sha256.Size]byte]string{}
	for _, person := range slices.Sorted(maps.Keys(tokens)) {
		token := tokens[person]
		if _, ok := people[person]; !ok {
			return nil, fmt.Errorf("a token for %q, who is not one of the people (ana, ben)", person)
		}
		if len(token) < minToken {
			return nil, fmt.Errorf("%s's token is shorter than %d characters", person, minToken)
		}
		sum := sha256.Sum256([]byte(token))
		if other, dup := owner[sum]; dup {
			return nil, fmt.Errorf("%s has the token of %s: each person needs their own", person, other)
		}
		a.tokens[person], owner[sum] = sum, person
	}
	if len(a.tokens) == 0 {
		return nil, errors.New("no person has a token")
	}
	return a, nil
}

// readTokens reads person=token lines, one line a person; blank lines and
// lines starting with # are skipped.
func readTokens(r io.Reader) (map[string]string, error) {
	tokens := map[string]string{}
	lines := bufio.NewScanner(r)
	for n := 1; lines.Scan(); n++ {
		line := strings.TrimSpace(lines.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		person, token, ok := strings.Cut(line, "=")
		if !ok || strings.TrimSpace(person) == "" || strings.TrimSpace(token) == "" {
			return nil, fmt.Errorf("line %d is not person=token", n)
		}
		person = strings.TrimSpace(person)
		if _, dup := tokens[person]; dup {
			return nil, fmt.Errorf("line %d gives %q a token again: one line a person", n, person)
		}
		tokens[person] = strings.TrimSpace(token)
	}
	return tokens, lines.Err()
}

// newTokens makes a random token for each of the demo's people.
func newTokens() map[string]string {
	tokens := map[string]string{}
	for person := range people {
		tokens[person] = secret()
	}
	return tokens
}

// secret is 256 random bits, as text.
func secret() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return base64.RawURLEncoding.EncodeToString(b)
}

// authenticate names the person of a request: by its bearer token, or by
// its sign-in cookie. Nothing else a client sends names a person.
func (a *access) authenticate(r *http.Request) (planexec.Delegation, error) {
	person, err := a.who(r)
	if err != nil {
		return planexec.Delegation{}, err
	}
	return planexec.Delegation{Tenant: tenant, User: person, Scope: scope(person)}, nil
}

func (a *access) who(r *http.Request) (string, error) {
	if h := r.Header.Get("Authorization"); h != "" {
		token, ok := strings.CutPrefix(h, "Bearer ")
		if person := a.byToken(token); ok && person != "" {
			return person, nil
		}
		return "", errBadToken
	}
	c, err := r.Cookie(cookieName)
	if err != nil {
		return "", errNotSignedIn
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	key := sha256.Sum256([]byte(c.Value))
	g, ok := a.cookies[key]
	if !ok || !a.now().Before(g.until) {
		delete(a.cookies, key)
		return "", errBadCookie
	}
	return g.person, nil
}

// byToken is the person whose token this is, or "". Every token is
// compared, each in constant time, so the time taken says nothing of
// which was near.
func (a *access) byToken(token string) string {
	sum := sha256.Sum256([]byte(token))
	found := ""
	for person, want := range a.tokens {
		if subtle.ConstantTimeCompare(sum[:], want[:]) == 1 {
			found = person
		}
	}
	return found
}

// link makes a one-time sign-in code for person, good for linkLife.
func (a *access) link(person string) string {
	code := secret()
	a.mu.Lock()
	defer a.mu.Unlock()
	a.links[sha256.Sum256([]byte(code))] = grant{person, a.now().Add(linkLife)}
	return code
}

// redeem spends a one-time code: its person, or "".
func (a *access) redeem(code string) string {
	key := sha256.Sum256([]byte(code))
	a.mu.Lock()
	defer a.mu.Unlock()
	g, ok := a.links[key]
	delete(a.links, key)
	if !ok || !a.now().Before(g.until) {
		return ""
	}
	return g.person
}

// signIn answers the sign-in form (a one-time code, or a person's token)
// with a cookie that is the browser's sign-in: HttpOnly, so no script
// reads it, and SameSite=Strict, so no other site's page sends it.
func (a *access) signIn(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 4<<10)
	if t, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); t != "application/x-www-form-urlencoded" || r.ParseForm() != nil {
		signInPage(w, http.StatusBadRequest, "", "The sign-in form could not be read.")
		return
	}
	person := ""
	if code := r.PostForm.Get("code"); code != "" {
		person = a.redeem(code)
	} else if token := r.PostForm.Get("token"); token != "" {
		person = a.byToken(token)
	}
	if person == "" {
		signInPage(w, http.StatusUnauthorized, "", "That link was used already or is too old, or the token is no one's. Sign in with your token.")
		return
	}
	value := secret()
	a.mu.Lock()
	now := a.now()
	for _, m := range []map[[sha256.Size]byte]grant{a.links, a.cookies} {
		maps.DeleteFunc(m, func(_ [sha256.Size]byte, g grant) bool { return !now.Before(g.until) })
	}
	a.cookies[sha256.Sum256([]byte(value))] = grant{person, now.Add(cookieLife)}
	a.mu.Unlock()
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: value, Path: "/", MaxAge: int(cookieLife.Seconds()),
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

// signOut ends the browser's sign-in.
func (a *access) signOut(w http.ResponseWriter, r *http.Request) {
	if c, err := r.Cookie(cookieName); err == nil {
		a.mu.Lock()
		delete(a.cookies, sha256.Sum256([]byte(c.Value)))
		a.mu.Unlock()
	}
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: "", Path: "/", MaxAge: -1,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
	http.Redirect(w, r, "/signin", http.StatusSeeOther)
}

// persons is the people with a token, sorted.
func (a *access) persons() []string {
	out := make([]string, 0, len(a.tokens))
	for p := range a.tokens {
		out = append(out, p)
	}
	slices.Sort(out)
	return out
}
