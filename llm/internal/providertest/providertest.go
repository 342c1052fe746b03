// Package providertest holds what the adapters' wire-format tests share
// beyond each provider's own format: answers too large to hold, gzip that
// inflates far past its size, and a measure of what a call allocates.
package providertest

import (
	"bytes"
	"compress/gzip"
	"io"
	"runtime"
	"sync"
)

// Huge is the size of the answers that must be refused: far past any
// adapter's default bound, small enough for a test to send over loopback.
const Huge = 96 << 20

// WriteHuge writes prefix, n bytes of spaces, then suffix to w in chunks,
// holding none of it, and stops at the first failed write (the client went
// away). The whole is valid JSON when prefix and suffix make it so.
func WriteHuge(w io.Writer, prefix string, n int64, suffix string) {
	if _, err := io.WriteString(w, prefix); err != nil {
		return
	}
	chunk := bytes.Repeat([]byte(" "), 64<<10)
	for n > 0 {
		c := chunk[:min(n, int64(len(chunk)))]
		if _, err := w.Write(c); err != nil {
			return
		}
		n -= int64(len(c))
	}
	_, _ = io.WriteString(w, suffix)
}

var bomb = sync.OnceValue(func() []byte {
	// Members of a gzip stream inflate one after another: one MiB of
	// spaces, compressed once, is repeated, as compressing it all would take
	// seconds under the race detector.
	var b bytes.Buffer
	b.Write(Gzip(`{"pad":"`))
	mib := Gzip(string(bytes.Repeat([]byte(" "), 1<<20)))
	for range Huge >> 20 {
		b.Write(mib)
	}
	b.Write(Gzip(`"}`))
	return b.Bytes()
})

// GzipBomb is a gzip stream of about 100 KB that inflates to Huge bytes of
// JSON. It is made once per test binary.
func GzipBomb() []byte { return bomb() }

// Gzip compresses s.
func Gzip(s string) []byte {
	var b bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&b, gzip.BestCompression)
	_, _ = io.WriteString(zw, s)
	_ = zw.Close()
	return b.Bytes()
}

// Allocated returns the bytes allocated on the heap, by every goroutine,
// while f ran: an answer read whole shows up here in full, however soon it
// is dropped.
func Allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}
