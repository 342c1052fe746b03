package main

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strings"
)

// keysVariable is the environment variable that gives the keys when -keys
// does not: person=key pairs separated by commas. Keys are never flags, as
// a command line is visible to every user of the machine.
const keysVariable = "PLANEXEC_SERVER_KEYS"

// minKeyLength is the shortest key accepted: a short key is guessed.
const minKeyLength = 16

// generatedPerson is whose key the server makes when it is given none.
const generatedPerson = "local"

var (
	personName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}$`)
	keyText    = regexp.MustCompile(`^[A-Za-z0-9._~+/=-]+$`)
)

// Why a request is not authenticated. The key itself is never in an
// error, nor logged.
var (
	errNoKey      = errors.New("the request carries no bearer key (Authorization: Bearer <key>)")
	errUnknownKey = errors.New("the request's key is no one's")
)

// keyring is each person's API key, kept as a SHA-256 digest so that
// checking a key compares values of one length, in constant time, with
// every person's. It is safe for concurrent use.
type keyring struct {
	people    []string            // sorted
	digests   [][sha256.Size]byte // digests[i] is people[i]'s key's
	generated string              // the key made at start, when none was given
}

// loadKeys reads the keys from file (-keys) or, when file is "", from env
// (the value of keysVariable); with neither, it makes one random key, of
// the person "local", for this process. A file and the variable at once
// are refused: one source of keys.
func loadKeys(file, env string) (*keyring, error) {
	switch {
	case file != "" && env != "":
		return nil, fmt.Errorf("keys are given by -keys and by %s: give one of them", keysVariable)
	case file != "":
		b, err := os.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("reading the keys: %w", err)
		}
		return parseKeys(string(b), "-keys "+file)
	case env != "":
		return parseKeys(env, keysVariable)
	}
	key := "pex-" + rand.Text()
	return &keyring{people: []string{generatedPerson}, digests: [][sha256.Size]byte{sha256.Sum256([]byte(key))}, generated: key}, nil
}

// parseKeys reads person=key pairs, one a line or separated by commas;
// blank lines and lines that start with # are skipped. from names the
// source in errors.
func parseKeys(text, from string) (*keyring, error) {
	byPerson := map[string][sha256.Size]byte{}
	seen := map[[sha256.Size]byte]string{}
	for n, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		for pair := range strings.SplitSeq(line, ",") {
			pair = strings.TrimSpace(pair)
			if pair == "" {
				continue
			}
			at := fmt.Sprintf("%s, line %d", from, n+1)
			person, key, ok := strings.Cut(pair, "=")
			person, key = strings.TrimSpace(person), strings.TrimSpace(key)
			switch {
			case !ok || !personName.MatchString(person):
				return nil, fmt.Errorf("%s: a pair is person=key, the person 1 to 64 letters, digits or ._@-", at)
			case len(key) < minKeyLength || !keyText.MatchString(key):
				return nil, fmt.Errorf("%s: the key of %q is not %d or more letters, digits or ._~+/=-; make one with: openssl rand -hex 24", at, person, minKeyLength)
			}
			if _, dup := byPerson[person]; dup {
				return nil, fmt.Errorf("%s: %q has a key already: one key a person", at, person)
			}
			d := sha256.Sum256([]byte(key))
			if other, dup := seen[d]; dup {
				return nil, fmt.Errorf("%s: %q has the key of %q: each person needs their own", at, person, other)
			}
			byPerson[person], seen[d] = d, person
		}
	}
	if len(byPerson) == 0 {
		return nil, fmt.Errorf("%s gives no keys: person=key, one a line", from)
	}
	k := &keyring{}
	for _, p := range slices.Sorted(maps.Keys(byPerson)) {
		k.people = append(k.people, p)
		k.digests = append(k.digests, byPerson[p])
	}
	return k, nil
}

// authenticate names the person whose key the request's bearer token is
// (Authorization: Bearer <key>, as OpenAI clients send their API key): the
// tenant of their sessions. It is plannerapi.Config.Authenticate.
func (k *keyring) authenticate(r *http.Request) (string, error) {
	scheme, key, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", errNoKey
	}
	d := sha256.Sum256([]byte(strings.TrimSpace(key)))
	who := ""
	for i := range k.digests { // every one, matched or not
		if subtle.ConstantTimeCompare(d[:], k.digests[i][:]) == 1 {
			who = k.people[i]
		}
	}
	if who == "" {
		return "", errUnknownKey
	}
	return who, nil
}
