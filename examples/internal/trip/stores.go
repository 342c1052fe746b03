//go:build stores

package trip

import (
	"context"

	"github.com/planexec/planexec/store/postgres"
	"github.com/planexec/planexec/store/sqlite"
)

// The durable stores are compiled in only with -tags stores; the examples
// start that build by themselves when -store names one.
func init() {
	durableStore = func(ctx context.Context, kind, where string) (closingStore, error) {
		if kind == "postgres" {
			st, err := postgres.Open(ctx, where)
			if err != nil {
				return nil, err
			}
			return st, nil
		}
		st, err := sqlite.Open(ctx, where)
		if err != nil {
			return nil, err
		}
		return st, nil
	}
}
