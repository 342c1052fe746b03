package sqlite_test

import (
	"testing"
	"time"

	"github.com/planexec/planexec/store/sqlite"
	"github.com/planexec/planexec/storetest"
)

func TestClaimsAndSpendsStayLinearizableWhenCallsAreCancelledPartWay(t *testing.T) {
	storetest.Linearizable(t, func(t testing.TB, now func() time.Time) storetest.Stores {
		s, _ := openNew(t, sqlite.WithClock(now))
		return storetest.Stores{Store: s}
	}, storetest.LinearizableOptions{})
}
