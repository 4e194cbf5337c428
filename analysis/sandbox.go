package analysis

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/duckdb/duckdb-go/v2"
)

// Sandbox confines the SQL of a session to reading the run's views, for SQL that someone
// else wrote (a shared notebook, a service): DuckDB may read the run's cached files and
// nothing else (enable_external_access off, allowed_paths the cached files), loads and
// installs no extension, attaches no database, and its configuration is locked; a query must
// be one SELECT, which also refuses COPY, ATTACH, INSTALL, LOAD and SET before
// DuckDB runs them. Without a sandbox a session has the user's own DuckDB power (COPY … TO a
// file, read_csv of any file, extensions).
type Sandbox struct {
	// MemoryLimit is DuckDB's memory_limit in bytes (DefaultSandboxMemory when 0).
	MemoryLimit int64
	// MaxRows caps a result's rows, which are held in memory (DefaultSandboxRows when 0).
	MaxRows int
}

// Defaults of a Sandbox's zero values.
const (
	DefaultSandboxMemory = 1 << 30
	DefaultSandboxRows   = 1_000_000
)

// SandboxError is a query or statement the sandbox refuses.
type SandboxError struct{ Reason string }

func (e *SandboxError) Error() string {
	return "refused in the sandbox (analyze --sandbox): " + e.Reason
}

// lockDown applies sb to the session's database, whose views read files.
func (s *Session) lockDown(ctx context.Context, sb Sandbox, files []string) error {
	if sb.MemoryLimit <= 0 {
		sb.MemoryLimit = DefaultSandboxMemory
	}
	if sb.MaxRows <= 0 {
		sb.MaxRows = DefaultSandboxRows
	}
	quoted := make([]string, len(files))
	for i, f := range files {
		quoted[i] = quoteString(f)
	}
	// In this order: the settings after enable_external_access=false refuse to change the
	// file system ones, and lock_configuration comes last.
	for _, q := range []string{
		"SET temp_directory = ''", // nothing spills to disk: the memory limit is the limit
		fmt.Sprintf("SET allowed_paths = [%s]", strings.Join(quoted, ", ")),
		"SET enable_external_access = false",
		"SET autoinstall_known_extensions = false",
		"SET autoload_known_extensions = false",
		"SET allow_community_extensions = false",
		fmt.Sprintf("SET memory_limit = '%dB'", sb.MemoryLimit),
		"SET lock_configuration = true",
	} {
		if _, err := s.db.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("analysis: sandbox: %s: %w", q, err)
		}
	}
	s.sandbox = &sb
	return nil
}

// vet refuses, in a sandboxed session, a query that is not one SELECT: DuckDB
// prepares it (which runs nothing) and says what kind of statement it is.
func (s *Session) vet(ctx context.Context, query string) error {
	if s.sandbox == nil {
		return nil
	}
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	return conn.Raw(func(dc any) error {
		c, ok := dc.(driver.Conn)
		if !ok {
			return errors.New("analysis: sandbox: the DuckDB driver cannot prepare statements")
		}
		// Prepare, not PrepareContext: the driver's PrepareContext runs every statement of a
		// query but the last, to prepare the last; Prepare takes one statement only and runs
		// nothing.
		st, err := c.Prepare(query)
		if err != nil && strings.Contains(err.Error(), "multi-statement") {
			return &SandboxError{Reason: "more than one statement: give one SELECT"}
		}
		if err != nil && strings.Contains(err.Error(), "disabled by configuration") {
			msg, _, _ := strings.Cut(err.Error(), "\n")
			return &SandboxError{Reason: msg}
		}
		if err != nil {
			return err
		}
		defer st.Close()
		ds, ok := st.(*duckdb.Stmt)
		if !ok {
			return errors.New("analysis: sandbox: not a DuckDB statement")
		}
		typ, err := ds.StatementType()
		if err != nil {
			return err
		}
		if typ != duckdb.STATEMENT_TYPE_SELECT { // not EXPLAIN: EXPLAIN ANALYZE runs its statement
			return &SandboxError{Reason: fmt.Sprintf("%s statements are refused: only a SELECT over the run's views is allowed", stmtNames[typ])}
		}
		return nil
	})
}

// tooManyRows refuses a sandboxed result past its row cap.
func (s *Session) tooManyRows(n int) error {
	if s.sandbox == nil || n <= s.sandbox.MaxRows {
		return nil
	}
	return &SandboxError{Reason: fmt.Sprintf("the result has more than %d rows: add a LIMIT or aggregate", s.sandbox.MaxRows)}
}

// stmtNames names the statement kinds the sandbox refuses.
var stmtNames = map[duckdb.StmtType]string{
	duckdb.STATEMENT_TYPE_INSERT: "INSERT", duckdb.STATEMENT_TYPE_UPDATE: "UPDATE", duckdb.STATEMENT_TYPE_DELETE: "DELETE",
	duckdb.STATEMENT_TYPE_PREPARE: "PREPARE", duckdb.STATEMENT_TYPE_CREATE: "CREATE", duckdb.STATEMENT_TYPE_EXECUTE: "EXECUTE",
	duckdb.STATEMENT_TYPE_ALTER: "ALTER", duckdb.STATEMENT_TYPE_TRANSACTION: "transaction", duckdb.STATEMENT_TYPE_COPY: "COPY",
	duckdb.STATEMENT_TYPE_ANALYZE: "ANALYZE", duckdb.STATEMENT_TYPE_VARIABLE_SET: "SET VARIABLE", duckdb.STATEMENT_TYPE_CREATE_FUNC: "CREATE FUNCTION",
	duckdb.STATEMENT_TYPE_DROP: "DROP", duckdb.STATEMENT_TYPE_EXPORT: "EXPORT", duckdb.STATEMENT_TYPE_PRAGMA: "PRAGMA",
	duckdb.STATEMENT_TYPE_VACUUM: "VACUUM", duckdb.STATEMENT_TYPE_CALL: "CALL", duckdb.STATEMENT_TYPE_SET: "SET",
	duckdb.STATEMENT_TYPE_LOAD: "LOAD or INSTALL", duckdb.STATEMENT_TYPE_ATTACH: "ATTACH", duckdb.STATEMENT_TYPE_DETACH: "DETACH",
	duckdb.STATEMENT_TYPE_EXTENSION: "extension", duckdb.STATEMENT_TYPE_MULTI: "multi-statement", duckdb.STATEMENT_TYPE_INVALID: "unknown",
}

// allFiles is every file behind the views, sorted.
func allFiles(paths map[string][]string) []string {
	var all []string
	for _, files := range paths {
		all = append(all, files...)
	}
	slices.Sort(all)
	return all
}
