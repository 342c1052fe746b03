package sqlite

import (
	"context"
	"database/sql"
	"time"
)

// SchemaVersion is the schema this package writes.
var SchemaVersion = schemaVersion

// MigrateTo creates the file at path with the schema of an earlier version
// than this package's, so a test can write rows as an earlier version of
// the package did and see them carried over.
func MigrateTo(ctx context.Context, path string, version int) error {
	db, err := sql.Open("sqlite", dsn(path, 5*time.Second, false, false))
	if err != nil {
		return err
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	return setUp(ctx, db, 5*time.Second, version)
}
