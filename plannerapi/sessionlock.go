package plannerapi

import (
	"context"
	"errors"
	"sync"
)

// maxWaiting bounds the requests that wait for one session in a server.
const maxWaiting = 16

// errQueueFull is a request for a session that maxWaiting requests
// already wait for.
var errQueueFull = errors.New("plannerapi: too many requests wait for the session")

// sessionLocks runs one request at a time per session within a server: the
// others wait their turn, in the order they came.
type sessionLocks struct {
	mu sync.Mutex
	m  map[sessionKey]*sessionLock
}

// sessionKey names a session: its tenant's, of its id.
type sessionKey struct{ tenant, session string }

type sessionLock struct {
	turn chan struct{} // holds a token while a request holds the session
	refs int           // the request holding it and those waiting
}

// lock waits for the session's turn, until ctx is done; unlock gives it to
// the next. Past maxWaiting requests waiting it is errQueueFull.
func (l *sessionLocks) lock(ctx context.Context, k sessionKey) (unlock func(), err error) {
	l.mu.Lock()
	if l.m == nil {
		l.m = map[sessionKey]*sessionLock{}
	}
	e := l.m[k]
	if e == nil {
		e = &sessionLock{turn: make(chan struct{}, 1)}
		l.m[k] = e
	}
	if e.refs > maxWaiting {
		l.mu.Unlock()
		return nil, errQueueFull
	}
	e.refs++
	l.mu.Unlock()
	select {
	case e.turn <- struct{}{}:
		return func() {
			<-e.turn
			l.release(k, e)
		}, nil
	case <-ctx.Done():
		l.release(k, e)
		return nil, ctx.Err()
	}
}

// release drops a request's interest in a session, and the session's lock
// once nobody holds or waits for it.
func (l *sessionLocks) release(k sessionKey, e *sessionLock) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if e.refs--; e.refs == 0 {
		delete(l.m, k)
	}
}
