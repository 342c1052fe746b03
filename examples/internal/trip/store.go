package trip

import (
	"context"
	"fmt"
	"strings"

	"github.com/planexec/planexec/store"
	"github.com/planexec/planexec/store/memory"
)

// durableStore opens a SQLite store in the file where (kind "sqlite") or a
// PostgreSQL one on the DSN where (kind "postgres"). It is nil unless the
// program was built with -tags stores (stores.go): the default build does
// not wait for the database drivers.
var durableStore func(ctx context.Context, kind, where string) (closingStore, error)

// A closingStore is a store that holds a connection or a file until it is
// closed.
type closingStore interface {
	store.Store
	Close() error
}

// StoresCompiledIn reports whether the program was built with the durable
// stores.
func StoresCompiledIn() bool { return durableStore != nil }

// durable reports whether spec names a durable store.
func durable(spec string) bool {
	kind, _, _ := strings.Cut(spec, ":")
	return kind == "sqlite" || kind == "postgres"
}

// OpenStore opens the store spec names, "sqlite:FILE" or "postgres:DSN", or
// a memory store when spec is empty, and returns it with what closes it. A
// durable store, in a build without the durable stores, is ErrNeedsStores.
func OpenStore(ctx context.Context, spec string) (store.Store, func(), error) {
	kind, where, _ := strings.Cut(spec, ":")
	switch {
	case spec == "":
		return memory.New(), func() {}, nil
	case !durable(spec):
		return nil, nil, fmt.Errorf("-store %q: want sqlite:FILE or postgres:DSN", spec)
	case durableStore == nil:
		return nil, nil, ErrNeedsStores
	}
	st, err := durableStore(ctx, kind, where)
	if err != nil {
		return nil, nil, err
	}
	return st, func() { _ = st.Close() }, nil
}
