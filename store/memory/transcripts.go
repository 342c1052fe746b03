package memory

import (
	"context"
	"encoding/json"
	"time"

	"github.com/planexec/planexec/store"
)

// conversation is what the store keeps of one session: its record, whose
// Seq is the number of entries, and its transcript, entry i numbered i+1.
type conversation struct {
	rec     store.SessionRecord
	entries []store.TranscriptEntry
}

// write appends entries, the store's own copies, stamped at, and replaces
// the document with doc, the store's own copy, unless it is nil. Callers
// hold the store's mu and have checked that the write may be made.
func (c *conversation) write(doc json.RawMessage, entries []json.RawMessage, at time.Time) {
	if doc != nil {
		c.rec.Doc = doc
	}
	for _, e := range entries {
		c.rec.Seq++
		c.entries = append(c.entries, store.TranscriptEntry{Seq: c.rec.Seq, At: at, Entry: e})
	}
	c.rec.Updated = at
}

// conversation returns the session tenant/id, or ErrNoRecord. Callers hold
// s.mu.
func (s *Store) conversation(tenant, id string) (*conversation, error) {
	c, ok := s.sessions[[2]string{tenant, id}]
	if !ok {
		return nil, store.ErrNoRecord
	}
	return c, nil
}

// CreateSession implements store.TranscriptStore. The session starts with no
// entries and no turn whatever rec says, created and updated at the store's
// clock.
func (s *Store) CreateSession(_ context.Context, rec store.SessionRecord) error {
	doc := clone(rec.Doc)
	s.mu.Lock()
	defer s.mu.Unlock()
	k := [2]string{rec.Tenant, rec.ID}
	if _, ok := s.sessions[k]; ok {
		return store.ErrExists
	}
	now := s.now()
	s.sessions[k] = &conversation{rec: store.SessionRecord{Tenant: rec.Tenant, ID: rec.ID, Doc: doc, Created: now, Updated: now}}
	return nil
}

// Session implements store.TranscriptStore.
func (s *Store) Session(_ context.Context, tenant, id string) (store.SessionRecord, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, err := s.conversation(tenant, id)
	if err != nil {
		return store.SessionRecord{}, err
	}
	rec := c.rec
	rec.Doc = clone(rec.Doc)
	return rec, nil
}

// TakeTurn implements store.TranscriptStore.
func (s *Store) TakeTurn(_ context.Context, w *store.TurnWrite) (store.TurnResult, error) {
	// Copied before the lock, so that the lock is held no longer than the
	// write takes.
	doc, entries := clone(w.Doc), cloneAll(w.Entries)
	s.mu.Lock()
	defer s.mu.Unlock()
	c, err := s.conversation(w.Tenant, w.Session)
	if err != nil {
		return store.TurnResult{}, err
	}
	if c.rec.Turn.Epoch != w.Epoch || c.rec.Turn.Held(w.Now) {
		return store.TurnResult{}, store.ErrTurnHeld
	}
	c.rec.Turn = store.TurnState{Epoch: w.Epoch + 1, Holder: w.Holder, Until: w.Until}
	if w.End {
		// A repair: the write is made and no turn is left running.
		c.rec.Turn = store.TurnState{Epoch: w.Epoch + 1}
	}
	c.write(doc, entries, s.now())
	return store.TurnResult{Epoch: c.rec.Turn.Epoch, Seq: c.rec.Seq}, nil
}

// WriteTurn implements store.TranscriptStore. A turn whose lease ran out
// but was not taken over still holds it, as an idempotency claim does: only
// a release or a take-over fences it.
func (s *Store) WriteTurn(_ context.Context, w *store.TurnWrite) (store.TurnResult, error) {
	doc, entries := clone(w.Doc), cloneAll(w.Entries)
	s.mu.Lock()
	defer s.mu.Unlock()
	c, err := s.conversation(w.Tenant, w.Session)
	if err != nil {
		return store.TurnResult{}, err
	}
	if c.rec.Turn.Epoch != w.Epoch || c.rec.Turn.Holder == "" {
		return store.TurnResult{}, store.ErrFenced
	}
	// Reported as it was before the write: a turn ending as it was asked
	// to stop learns of it too.
	cancel := c.rec.Turn.Cancel
	if w.End {
		c.rec.Turn = store.TurnState{Epoch: w.Epoch}
	} else {
		c.rec.Turn.Until = w.Until
	}
	c.write(doc, entries, s.now())
	return store.TurnResult{Epoch: w.Epoch, Seq: c.rec.Seq, Cancel: cancel}, nil
}

// AppendEntries implements store.TranscriptStore.
func (s *Store) AppendEntries(_ context.Context, tenant, session string, entries []json.RawMessage) (int64, error) {
	entries = cloneAll(entries)
	s.mu.Lock()
	defer s.mu.Unlock()
	c, err := s.conversation(tenant, session)
	if err != nil {
		return 0, err
	}
	if len(entries) > 0 {
		c.write(nil, entries, s.now())
	}
	return c.rec.Seq, nil
}

// AppendEntriesAfter implements store.TranscriptStore.
func (s *Store) AppendEntriesAfter(_ context.Context, tenant, session string, last int64, entries []json.RawMessage) (int64, error) {
	entries = cloneAll(entries)
	s.mu.Lock()
	defer s.mu.Unlock()
	c, err := s.conversation(tenant, session)
	if err != nil {
		return 0, err
	}
	if c.rec.Seq != last {
		return 0, store.ErrMoved
	}
	if len(entries) > 0 {
		c.write(nil, entries, s.now())
	}
	return c.rec.Seq, nil
}

// CancelTurn implements store.TranscriptStore.
func (s *Store) CancelTurn(_ context.Context, tenant, session string, now time.Time) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, err := s.conversation(tenant, session)
	if err != nil {
		return false, err
	}
	if !c.rec.Turn.Held(now) {
		return false, nil
	}
	if !c.rec.Turn.Cancel {
		c.rec.Turn.Cancel = true
		c.rec.Updated = s.now()
	}
	return true, nil
}

// Transcript implements store.TranscriptStore.
func (s *Store) Transcript(_ context.Context, tenant, session string, after int64, limit int) ([]store.TranscriptEntry, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, err := s.conversation(tenant, session)
	if err != nil {
		return nil, err
	}
	after = max(after, 0)
	if after >= int64(len(c.entries)) || limit <= 0 {
		return nil, nil
	}
	// Never after+limit: a limit as large as math.MaxInt would overflow it.
	page := c.entries[after:]
	page = page[:min(len(page), limit)]
	out := make([]store.TranscriptEntry, len(page))
	docs := make([]json.RawMessage, len(page))
	for i, e := range page {
		out[i], docs[i] = e, e.Entry
	}
	for i, d := range cloneAll(docs) {
		out[i].Entry = d
	}
	return out, nil
}

// cloneAll copies docs into one allocation. Each copy's capacity ends where
// it does, so appending to one cannot write over the next.
func cloneAll(docs []json.RawMessage) []json.RawMessage {
	if len(docs) == 0 {
		return nil
	}
	size := 0
	for _, d := range docs {
		size += len(d)
	}
	buf := make([]byte, 0, size)
	out := make([]json.RawMessage, len(docs))
	for i, d := range docs {
		if d == nil {
			continue
		}
		start := len(buf)
		buf = append(buf, d...)
		out[i] = buf[start:len(buf):len(buf)]
	}
	return out
}
