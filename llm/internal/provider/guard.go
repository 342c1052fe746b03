package provider

import (
	"bytes"
	"compress/flate"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/planexec/planexec/llm"
)

// DefaultMaxBody is the default bound on one answer's body, counted after
// decompression: 8 MiB. A plan is at most 1 MiB by default; written as a
// JSON string, its escapes can make it several times that.
const DefaultMaxBody = 8 << 20

// Exchange is what Guard saw of the last attempt of one call. Generate reads
// it after the SDK returns, in the goroutine that made the call.
type Exchange struct {
	// Status is the HTTP status of the last answer; 0 when the last attempt
	// got none.
	Status int
	// Header is the last answer's header.
	Header http.Header
	// Body is the last answer's whole body, decompressed, when Err is nil.
	Body []byte
	// Err says why the body was refused: it wraps llm.ErrResponseTooLarge or
	// llm.ErrMalformedResponse.
	Err error
	// Retryable is the server's advice on the last answer, before Guard
	// changed it: its status's class, or its x-should-retry header.
	Retryable bool
	// Held reports that the server asked for a wait longer than the call had
	// left (or than MaxRetryWait), so the retry was not made.
	Held bool
}

type exchangeKey struct{}

// Track returns a context carrying a new Exchange, which Guard fills in for
// every request made with that context (or one derived from it).
func Track(ctx context.Context) (context.Context, *Exchange) {
	ex := new(Exchange)
	return context.WithValue(ctx, exchangeKey{}, ex), ex
}

// Guard returns a middleware, in the shape both SDKs' option.Middleware has,
// to install before any other. For each attempt it reads the answer's body
// at once, whole, up to maxBody bytes after any gzip decoding (the SDKs read
// it whole anyway), and records the answer in the context's Exchange:
//
//   - a body larger than maxBody, or not valid gzip, is refused: reading it
//     fails with an error wrapping llm.ErrResponseTooLarge or
//     llm.ErrMalformedResponse, and the answer is marked x-should-retry
//     false, so the SDK does not fetch it again;
//   - a body that breaks off is a failed attempt, as a dropped connection
//     is, which the SDK may retry;
//   - an answer the SDK would retry after a wait (Retry-After) longer than
//     the attempt's context has left, or than MaxRetryWait, is marked
//     x-should-retry false, so the SDK returns it at once instead of
//     sleeping past the deadline.
func Guard(maxBody int64) func(*http.Request, func(*http.Request) (*http.Response, error)) (*http.Response, error) {
	return func(req *http.Request, next func(*http.Request) (*http.Response, error)) (*http.Response, error) {
		ex, _ := req.Context().Value(exchangeKey{}).(*Exchange)
		if ex == nil {
			ex = new(Exchange) // a request not made by Generate is bounded all the same
		}
		*ex = Exchange{}
		res, err := next(req)
		if err != nil || res == nil || res.Body == nil {
			return res, err
		}
		body, refused, err := readBody(res, maxBody)
		if err != nil {
			return nil, err
		}
		ex.Status, ex.Header = res.StatusCode, res.Header
		ex.Retryable = RetryAdvice(res, RetryableStatus(res.StatusCode))
		if refused != nil {
			ex.Err = refused
			res.Header.Set("x-should-retry", "false")
			res.Body, res.ContentLength = refusedBody{refused}, -1
			return res, nil
		}
		ex.Body = body
		res.Body, res.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
		if wait, ok := RetryAfter(res.Header); ok && ex.Retryable && !fits(req.Context(), wait) {
			ex.Held = true
			res.Header.Set("x-should-retry", "false")
		}
		return res, nil
	}
}

// fits reports whether a wait of d leaves ctx time to try again.
func fits(ctx context.Context, d time.Duration) bool {
	if d > MaxRetryWait {
		return false
	}
	deadline, ok := ctx.Deadline()
	return !ok || time.Until(deadline) > d
}

// readBody reads and closes res's body: at most max bytes, decoded when its
// Content-Encoding is gzip (Go's transport has decoded it already when it
// asked for gzip itself; a server may send gzip unasked, or a caller ask for
// it). refused is set for a body too large or not valid gzip; err for a body
// that broke off.
func readBody(res *http.Response, max int64) (body []byte, refused, err error) {
	defer res.Body.Close()
	src := &readErr{r: res.Body}
	var r io.Reader = src
	size := int64(512)
	switch strings.ToLower(strings.TrimSpace(res.Header.Get("Content-Encoding"))) {
	case "gzip", "x-gzip":
		zr, zerr := gzip.NewReader(src)
		if zerr != nil {
			refused, err := notGzip(src)
			return nil, refused, err
		}
		defer zr.Close()
		r = zr
		res.Header.Del("Content-Encoding")
		res.Header.Del("Content-Length")
		res.Uncompressed = true
	case "", "identity":
		if res.ContentLength > max {
			return nil, tooLarge(max), nil
		}
		if res.ContentLength >= 0 {
			size = res.ContentLength + 1
		}
	}
	// Grown by doubling but never past max+1, so a refused body costs at
	// most about twice the bound, however large it is.
	buf := make([]byte, 0, size)
	for int64(len(buf)) <= max {
		if len(buf) == cap(buf) {
			buf = slices.Grow(buf, int(min(int64(cap(buf)), max+1-int64(len(buf)))))
		}
		n, rerr := r.Read(buf[len(buf):min(int64(cap(buf)), max+1)])
		buf = buf[:len(buf)+n]
		if rerr == io.EOF && int64(len(buf)) <= max {
			return buf, nil, nil
		}
		if rerr != nil && rerr != io.EOF {
			refused, err := notGzip(src)
			return nil, refused, err
		}
	}
	return nil, tooLarge(max), nil
}

// notGzip says why reading failed: the connection broke (broken), or the
// body is marked gzip but is not valid gzip (refused), whether Go's
// transport inflated it or readBody did. Only a gzip reader fails while the
// connection does not.
func notGzip(src *readErr) (refused, broken error) {
	if src.err != nil && !errors.Is(src.err, gzip.ErrHeader) && !errors.Is(src.err, gzip.ErrChecksum) &&
		!errors.As(src.err, new(flate.CorruptInputError)) {
		return nil, src.err
	}
	return fmt.Errorf("%w: the body is marked gzip but is not valid gzip", llm.ErrMalformedResponse), nil
}

func tooLarge(max int64) error {
	return fmt.Errorf("%w: it is over %d bytes; raise the bound with WithMaxResponseBytes if such answers are expected", llm.ErrResponseTooLarge, max)
}

// readErr remembers the error its reader returned, other than io.EOF.
type readErr struct {
	r   io.Reader
	err error
}

func (e *readErr) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	if err != nil && err != io.EOF {
		e.err = err
	}
	return n, err
}

// refusedBody is the body of an answer Guard refused: reading it fails.
type refusedBody struct{ err error }

func (b refusedBody) Read([]byte) (int, error) { return 0, b.err }
func (b refusedBody) Close() error             { return nil }

// ErrorBody is what an error answer's body says, in any of the shapes
// compatible servers write: {"error":{"type","code","param","message"}}
// (OpenAI, Anthropic), {"error":"text"} (TGI, LM Studio), {"message":"text"}
// or {"detail":"text"}. Members of other types are left empty. Its text is
// the server's, not yet redacted.
type ErrorBody struct {
	Type, Code, Param, Message string
}

// ParseErrorBody reads b as an ErrorBody; what it cannot read stays empty.
func ParseErrorBody(b []byte) ErrorBody {
	var top map[string]json.RawMessage
	if json.Unmarshal(b, &top) != nil {
		return ErrorBody{}
	}
	if raw, ok := top["error"]; ok {
		var obj map[string]json.RawMessage
		if json.Unmarshal(raw, &obj) == nil && obj != nil {
			return ErrorBody{Type: text(obj["type"]), Code: text(obj["code"]), Param: text(obj["param"]), Message: text(obj["message"])}
		}
		if s := text(raw); s != "" {
			return ErrorBody{Message: s}
		}
	}
	msg := text(top["message"])
	if msg == "" {
		msg = text(top["detail"])
	}
	return ErrorBody{Message: msg}
}

// text is a JSON string's value, or a JSON number as written; else "".
func text(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var n json.Number
	if json.Unmarshal(raw, &n) == nil {
		return n.String()
	}
	return ""
}

// DecodeObject reads body, which must be one JSON object and nothing else,
// into v. Its error wraps llm.ErrMalformedResponse and quotes nothing of the
// body: a member of the wrong type is named by its path.
func DecodeObject(body []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return fmt.Errorf("%w: the body is not a JSON object", llm.ErrMalformedResponse)
	}
	dec = json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(v); err != nil {
		if te, ok := errors.AsType[*json.UnmarshalTypeError](err); ok {
			kind, _, _ := strings.Cut(te.Value, " ") // "number 42": the value itself is not repeated
			return fmt.Errorf("%w: %s is a JSON %s", llm.ErrMalformedResponse, te.Field, kind)
		}
		return fmt.Errorf("%w: the body is not valid JSON", llm.ErrMalformedResponse)
	}
	if _, err := dec.Token(); err != io.EOF {
		return fmt.Errorf("%w: the body holds more than one JSON value", llm.ErrMalformedResponse)
	}
	return nil
}
