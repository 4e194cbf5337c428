// Package analysis queries a run's committed outputs with an embedded DuckDB.
//
// DuckDB cannot read the store directly (httpfs is not available), so Open lists the run's
// committed folders (those with a _MANIFEST.json), downloads their files through the storage
// layer into a local cache that mirrors the key layout (verifying each against its manifest's
// sha256; cached files that still match are not downloaded again), and registers one view per
// kind of output over read_parquet([...], hive_partitioning=false) (a sidecar's iteration and
// estimator come from its folders iter=N and est=E):
//
//	rollouts     iter=N/rollout/part-*.parquet                 (shards.Row)
//	advantages   iter=N/advantage/est=E/part-*.parquet         (shards.AdvantageRow + iteration, estimator)
//	diagnostics  iter=N/diagnostics/est=E/agents.parquet       (shards.DiagnosticsRow)
//	metrics      iter=N/learn/metrics.parquet                  (shards.MetricsRow)
//	evals        eval/step=N/results.parquet                   (shards.ResultRow)
//	train_evals  eval-train/step=N/results.parquet             (shards.ResultRow, training split)
//	eval_prompts eval[-train]/step=N/prompts.parquet           (shards.PromptRow, both splits)
//	ablations    ablations/<mode>/summary.parquet              (shards.SummaryRow)
//
// A view over no committed folder still exists, with the right columns and no rows. Canned
// reports (Reports) cover the common questions; Query runs any SQL.
package analysis

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"io"
	"math"
	"reflect"
	"strings"
	"time"

	"github.com/duckdb/duckdb-go/v2"

	"github.com/drmas-dev/drmas/shards"
	"github.com/drmas-dev/drmas/storage"
)

// Views are the views Open registers, in a fixed order.
var Views = []string{"rollouts", "advantages", "diagnostics", "metrics", "evals", "train_evals", "eval_prompts", "ablations"}

// viewRows are the row types of the views' files.
var viewRows = map[string]any{
	"rollouts": shards.Row{}, "advantages": shards.AdvantageRow{}, "diagnostics": shards.DiagnosticsRow{},
	"metrics": shards.MetricsRow{}, "evals": shards.ResultRow{}, "train_evals": shards.ResultRow{},
	"eval_prompts": shards.PromptRow{},
	"ablations":    shards.SummaryRow{},
}

// viewNoun names a view's contents in messages.
var viewNoun = map[string]string{
	"rollouts": "rollouts", "advantages": "advantage sidecars", "diagnostics": "diagnostics",
	"metrics": "learn metrics", "evals": "evaluations", "train_evals": "training-split evaluations",
	"eval_prompts": "per-prompt evaluations",
	"ablations":    "ablation summaries",
}

// Options configure Open.
type Options struct {
	Bucket storage.Bucket
	Run    string
	// CacheDir is the local cache root (mirrors store keys). Required: see DefaultCacheDir.
	CacheDir string
	// Threads caps DuckDB's threads (0: DuckDB's default).
	Threads int
	// Sandbox, if set, confines the session's SQL to reading the run's views (sandbox.go).
	Sandbox *Sandbox
}

// Session is an open DuckDB database with the run's views.
type Session struct {
	Run      string
	CacheDir string
	Stats    SyncStats
	Folders  []Folder
	// Counts is the number of files behind each view.
	Counts map[string]int
	// SyncTime and ViewTime are the time spent listing+downloading and registering views.
	SyncTime, ViewTime time.Duration

	connector *duckdb.Connector
	db        *sql.DB
	sandbox   *Sandbox // set once locked down
}

// Open syncs the run's committed folders into the cache and registers the views.
func Open(ctx context.Context, o Options) (*Session, error) {
	if o.Bucket == nil {
		return nil, fmt.Errorf("analysis: no store")
	}
	if o.CacheDir == "" {
		return nil, fmt.Errorf("analysis: no cache dir")
	}
	t0 := time.Now()
	folders, err := ListFolders(ctx, o.Bucket, o.Run)
	if err != nil {
		return nil, err
	}
	paths, st, err := Sync(ctx, o.Bucket, o.CacheDir, folders)
	if err != nil {
		return nil, err
	}
	s := &Session{Run: o.Run, CacheDir: o.CacheDir, Stats: st, Folders: folders, Counts: map[string]int{}, SyncTime: time.Since(t0)}
	t1 := time.Now()
	// Every connection shows times in UTC, as formatTime does: DuckDB's own casts of a
	// TIMESTAMPTZ (in --sql) would otherwise use the machine's time zone.
	s.connector, err = duckdb.NewConnector("", func(c driver.ExecerContext) error {
		_, err := c.ExecContext(context.Background(), "SET TimeZone = 'UTC'", nil)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("analysis: open duckdb: %w", err)
	}
	s.db = sql.OpenDB(s.connector)
	s.db.SetMaxOpenConns(1)
	if o.Threads > 0 {
		if _, err := s.db.ExecContext(ctx, fmt.Sprintf("SET threads TO %d", o.Threads)); err != nil {
			s.Close()
			return nil, fmt.Errorf("analysis: %w", err)
		}
	}
	for _, v := range Views {
		q := viewSQL(v, paths[v])
		if _, err := s.db.ExecContext(ctx, q); err != nil {
			s.Close()
			return nil, fmt.Errorf("analysis: create view %s: %w", v, err)
		}
		s.Counts[v] = len(paths[v])
	}
	if o.Sandbox != nil {
		if err := s.lockDown(ctx, *o.Sandbox, allFiles(paths)); err != nil {
			s.Close()
			return nil, err
		}
	}
	s.ViewTime = time.Since(t1)
	return s, nil
}

// Close releases the database.
func (s *Session) Close() error {
	var err error
	if s.db != nil {
		err = s.db.Close()
	}
	if s.connector != nil {
		_ = s.connector.Close()
	}
	return err
}

// DB is the session's database, for callers that scan rows themselves.
func (s *Session) DB() *sql.DB { return s.db }

// Empty reports whether view has no committed files.
func (s *Session) Empty(view string) bool { return s.Counts[view] == 0 }

// NotYet is the error of a report whose view is empty.
func (s *Session) NotYet(view string) error {
	return fmt.Errorf("run %s: no committed %s yet", s.Run, viewNoun[view])
}

// column is one column of a view; optional ones (nullable in the row type) may be missing from
// files written before they were added.
type column struct {
	name, typ string
	optional  bool
}

// columnsOf derives DuckDB columns from the parquet tags of a row struct.
func columnsOf(row any) []column {
	t := reflect.TypeOf(row)
	var out []column
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := f.Tag.Get("parquet")
		name, _, _ := strings.Cut(tag, ",")
		if name == "" || name == "-" {
			continue
		}
		out = append(out, column{name, duckType(f.Type), f.Type.Kind() == reflect.Pointer})
	}
	return out
}

func duckType(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "VARCHAR"
	case reflect.Bool:
		return "BOOLEAN"
	case reflect.Int32:
		return "INTEGER"
	case reflect.Int64, reflect.Int:
		return "BIGINT"
	case reflect.Uint64:
		return "UBIGINT"
	case reflect.Uint32:
		return "UINTEGER"
	case reflect.Float32:
		return "FLOAT"
	case reflect.Float64:
		return "DOUBLE"
	case reflect.Slice:
		return duckType(t.Elem()) + "[]"
	case reflect.Pointer:
		return duckType(t.Elem())
	}
	panic("analysis: no DuckDB type for " + t.String())
}

// viewColumns are the columns of a view, in order.
func viewColumns(view string) []column {
	cols := columnsOf(viewRows[view])
	if view == "advantages" {
		cols = append(cols, column{"iteration", "INTEGER", false}, column{"estimator", "VARCHAR", false})
	}
	return cols
}

func quoteString(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

func quoteIdent(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }

// viewSQL is the CREATE VIEW of view over files (none: a typed empty view).
func viewSQL(view string, files []string) string {
	cols := viewColumns(view)
	var sel []string
	if len(files) == 0 {
		for _, c := range cols {
			sel = append(sel, fmt.Sprintf("CAST(NULL AS %s) AS %s", c.typ, quoteIdent(c.name)))
		}
		return fmt.Sprintf("CREATE VIEW %s AS SELECT %s WHERE false", view, strings.Join(sel, ", "))
	}
	for _, c := range cols {
		switch {
		case view == "advantages" && c.name == "iteration":
			sel = append(sel, "CAST(regexp_extract(filename, "+quoteString(`[/\\]iter=([0-9]+)[/\\]advantage[/\\]est=[^/\\]+[/\\][^/\\]+$`)+", 1) AS INTEGER) AS iteration")
		case view == "advantages" && c.name == "estimator":
			sel = append(sel, "regexp_extract(filename, "+quoteString(`[/\\]est=([^/\\]+)[/\\][^/\\]+$`)+", 1) AS estimator")
		default:
			sel = append(sel, quoteIdent(c.name))
		}
	}
	q := make([]string, len(files))
	for i, f := range files {
		q[i] = quoteString(f)
	}
	// No hive partitioning: DuckDB would take every name=value folder of the whole local path
	// as a column, the cache root's too (a cache under /data/model=x/ would replace every
	// metrics row's model). The files carry their own iteration, estimator and step; a sidecar
	// lacks its iteration and estimator, which come from the last folders of its path.
	from := fmt.Sprintf("read_parquet([%s], hive_partitioning=false, union_by_name=true, filename=true)", strings.Join(q, ", "))
	// union_by_name fills a column that some files lack with NULL, but a column that every file
	// lacks does not exist: an optional column added later (evals' f1_mean) would be missing
	// from a run written before it. A typed empty row of the optional columns, united by name,
	// makes each one exist.
	var opt []string
	for _, c := range cols {
		if c.optional {
			opt = append(opt, fmt.Sprintf("CAST(NULL AS %s) AS %s", c.typ, quoteIdent(c.name)))
		}
	}
	if len(opt) > 0 {
		from = fmt.Sprintf("(SELECT %s WHERE false UNION ALL BY NAME SELECT * FROM %s)", strings.Join(opt, ", "), from)
	}
	return fmt.Sprintf("CREATE VIEW %s AS SELECT %s FROM %s", view, strings.Join(sel, ", "), from)
}

// Query runs sql and returns the whole result.
func (s *Session) Query(ctx context.Context, query string, args ...any) (*Table, error) {
	if err := s.vet(ctx, query); err != nil {
		return nil, err
	}
	rows, err := s.db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return nil, err
	}
	types, err := rows.ColumnTypes()
	if err != nil {
		return nil, err
	}
	colTypes := make([]*sqlType, len(types))
	for i, ct := range types {
		colTypes[i] = parseType(ct.DatabaseTypeName())
	}
	t := &Table{Columns: cols}
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return nil, err
		}
		for i, v := range vals {
			vals[i] = fromDriverNested(v, colTypes[i])
			if u, ok := vals[i].(unionValue); ok { // a top-level UNION is its member's value
				vals[i] = u.v
			}
		}
		t.Rows = append(t.Rows, vals)
		if err := s.tooManyRows(len(t.Rows)); err != nil {
			return nil, err
		}
	}
	return t, rows.Err()
}

// fromDriver gives the values whose Go form loses their SQL type the form DuckDB prints: a UUID
// (handed over as its 16 bytes, like a BLOB), and the dates and times (handed over as a
// time.Time), as DuckDB's cast to VARCHAR writes them (formatTime).
func fromDriver(v any, dbType string) any {
	switch x := v.(type) {
	case []byte:
		if dbType == "UUID" && len(x) == 16 {
			u := duckdb.UUID(x)
			return u.String()
		}
	case time.Time:
		if s, ok := formatTime(x, dbType); ok {
			return s
		}
	}
	return v
}

// formatTime writes a DATE, TIME, TIMETZ or TIMESTAMP (any unit, or WITH TIME ZONE, in UTC) as
// DuckDB does: "2024-01-02 03:04:05.5", fractions without trailing zeros, a year before 1 as
// "0045-03-15 (BC)", the infinities (which the driver hands over as the extreme values of the
// type's unit) as infinity and -infinity, and an offset as +00 or +05:30. (A TIME of 24:00:00
// reaches us as 00:00:00: the driver keeps only the time of day.) ok is false for another type.
func formatTime(t time.Time, dbType string) (string, bool) {
	var units, inf int64 = 0, math.MaxInt64 // the value in its type's unit; infinity in it
	switch dbType {
	case "DATE":
		units, inf = t.Unix()/86400, math.MaxInt32
	case "TIMESTAMP", "TIMESTAMPTZ":
		units = t.UnixMicro()
	case "TIMESTAMP_NS":
		units = t.UnixNano()
	case "TIMESTAMP_MS":
		units = t.UnixMilli()
	case "TIMESTAMP_S":
		units = t.Unix()
	case "TIME", "TIMETZ": // the time of day (TIMETZ: in its own offset)
		s := t.Format("15:04:05.999999999")
		if dbType == "TIMETZ" {
			s += offset(t)
		}
		return s, true
	default:
		return "", false
	}
	switch units {
	case inf:
		return "infinity", true
	case -inf:
		return "-infinity", true
	}
	year, era := t.Year(), ""
	if year <= 0 { // astronomical year 0 is 1 BC
		year, era = 1-year, " (BC)"
	}
	s := fmt.Sprintf("%04d-%02d-%02d", year, t.Month(), t.Day()) + era
	if dbType == "DATE" {
		return s, true
	}
	s += t.Format(" 15:04:05.999999999")
	if dbType == "TIMESTAMPTZ" {
		s += offset(t)
	}
	return s, true
}

// offset writes t's UTC offset as DuckDB does: +00, -08, +05:30.
func offset(t time.Time) string {
	_, secs := t.Zone()
	sign := "+"
	if secs < 0 {
		sign, secs = "-", -secs
	}
	s := fmt.Sprintf("%s%02d", sign, secs/3600)
	// Minutes and seconds each where not 0, as DuckDB writes them (-00:00:30 as "-00:30").
	if m := secs % 3600 / 60; m != 0 {
		s += fmt.Sprintf(":%02d", m)
	}
	if sec := secs % 60; sec != 0 {
		s += fmt.Sprintf(":%02d", sec)
	}
	return s
}

// Describe writes one line per view: files and rows.
func (s *Session) Describe(ctx context.Context, w io.Writer) error {
	for _, v := range Views {
		var n int64
		if err := s.db.QueryRowContext(ctx, "SELECT count(*) FROM "+v).Scan(&n); err != nil {
			return err
		}
		fmt.Fprintf(w, "%-12s %4d files %10d rows\n", v, s.Counts[v], n)
	}
	return nil
}
