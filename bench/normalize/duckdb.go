package main

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/duckdb/duckdb-go/v2"

	"github.com/drmas-dev/drmas/layout"
)

func openDuckDB(ctx context.Context, threads int) (*sql.DB, func(), error) {
	connector, err := duckdb.NewConnector("", nil)
	if err != nil {
		return nil, nil, err
	}
	db := sql.OpenDB(connector)
	db.SetMaxOpenConns(1)
	if _, err := db.ExecContext(ctx, fmt.Sprintf("SET threads = %d", threads)); err != nil {
		db.Close()
		connector.Close()
		return nil, nil, err
	}
	return db, func() { db.Close(); connector.Close() }, nil
}

func sqlList(paths []string) string {
	q := make([]string, len(paths))
	for i, p := range paths {
		q[i] = "'" + strings.ReplaceAll(p, "'", "''") + "'"
	}
	return "[" + strings.Join(q, ", ") + "]"
}

// duckQuery is the drmas advantage (docs/design.md, "Estimators") in SQL: per (uid, agent), (score − avg) /
// (stddev_samp + ε), with μ = 0, σ = 1 for a group of one row; narrow output (row_id, advantage).
func duckQuery(parts []string, out string) string {
	return `COPY (
	SELECT row_id,
	       CASE WHEN count(*) OVER w = 1 THEN score / (1 + 1e-6)
	            ELSE (score - avg(score) OVER w) / (stddev_samp(score) OVER w + 1e-6) END AS advantage
	FROM read_parquet(` + sqlList(parts) + `)
	WINDOW w AS (PARTITION BY uid, agent)
) TO '` + out + `' (FORMAT parquet)`
}

// runDuckDB computes the same advantage column with DuckDB from the same part files.
func runDuckDB(ctx context.Context, store string, parts, threads int) (phaseResult, error) {
	db, closeDB, err := openDuckDB(ctx, threads)
	if err != nil {
		return phaseResult{}, err
	}
	defer closeDB()
	out := filepath.Join(store, "duckdb-out", "advantage.parquet")
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return phaseResult{}, err
	}
	q := duckQuery(partPaths(store, parts), out)
	start := time.Now()
	res, err := db.ExecContext(ctx, q)
	wall := time.Since(start)
	if err != nil {
		return phaseResult{}, fmt.Errorf("duckdb: %w", err)
	}
	n, _ := res.RowsAffected()
	return phaseResult{Engine: "duckdb", Rows: n, WallS: wall.Seconds()}, nil
}

// verify compares the drmas sidecars with DuckDB's output: every row id must be in both, with
// |Δ advantage| ≤ 1e-5; it also checks a sample of a few thousand row ids one by one.
func verify(ctx context.Context, root, duckOut string, rows int64) error {
	db, closeDB, err := openDuckDB(ctx, 2)
	if err != nil {
		return err
	}
	defer closeDB()
	// The last engine run was DuckDB, so its output is present; recompute the drmas sidecars.
	if _, err := runDrmas(ctx, root); err != nil {
		return err
	}
	side := filepath.Join(root, filepath.FromSlash(layout.AdvantageDir(runName, iter, "drmas")), "*.parquet")
	var n, both, bad int64
	var maxd float64
	err = db.QueryRowContext(ctx, `
		SELECT count(*), count(d.row_id), count(*) FILTER (WHERE abs(a.advantage - d.advantage) > 1e-5 OR d.row_id IS NULL),
		       coalesce(max(abs(a.advantage - d.advantage)), 0)
		FROM read_parquet('`+side+`') a LEFT JOIN read_parquet('`+duckOut+`') d USING (row_id)`).Scan(&n, &both, &bad, &maxd)
	if err != nil {
		return fmt.Errorf("verify: %w", err)
	}
	var sample int64
	var sampleMax float64
	err = db.QueryRowContext(ctx, `
		WITH s AS (SELECT row_id, advantage FROM read_parquet('`+side+`') USING SAMPLE 4000 ROWS (reservoir, 7))
		SELECT count(*), max(abs(s.advantage - d.advantage)) FROM s JOIN read_parquet('`+duckOut+`') d USING (row_id)`).Scan(&sample, &sampleMax)
	if err != nil {
		return fmt.Errorf("verify sample: %w", err)
	}
	fmt.Printf("agreement: %d sampled row ids, max |Δ| %.3g; all rows: %d drmas, %d matched in DuckDB, max |Δ| %.3g, %d over 1e-5\n",
		sample, sampleMax, n, both, maxd, bad)
	if n != rows || both != rows || bad != 0 || sample == 0 {
		return fmt.Errorf("outputs disagree")
	}
	return nil
}
