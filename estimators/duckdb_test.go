package estimators

import (
	"context"
	"database/sql"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/duckdb/duckdb-go/v2"
)

// TestMatchesDuckDB checks grpo, drmas, grpo_step, drmas_nostd, rloo and rloo_agent against DuckDB window-function SQL written
// straight from docs/design.md, "Estimators", on ~100 k random rows appended through the Appender API.
func TestMatchesDuckDB(t *testing.T) {
	if testing.Short() {
		t.Skip("DuckDB comparison skipped in -short mode")
	}
	ctx := context.Background()
	r := rand.New(rand.NewPCG(11, 12))
	cols := randomColumns(r, 5000) // ≈ 140 k rows
	t.Logf("%d rows", len(cols.Score))

	connector, err := duckdb.NewConnector("", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer connector.Close()
	db := sql.OpenDB(connector)
	defer db.Close()
	db.SetMaxOpenConns(1)
	if _, err := db.ExecContext(ctx, `CREATE TABLE t (rid BIGINT, g INTEGER, traj INTEGER, agent INTEGER, score DOUBLE)`); err != nil {
		t.Fatal(err)
	}
	conn, err := connector.Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	app, err := duckdb.NewAppenderFromConn(conn, "", "t")
	if err != nil {
		t.Fatal(err)
	}
	for i := range cols.Score {
		if err := app.AppendRow(int64(i), cols.Group[i], cols.Traj[i], cols.Agent[i], cols.Score[i]); err != nil {
			t.Fatal(err)
		}
	}
	if err := app.Close(); err != nil {
		t.Fatal(err)
	}
	if err := conn.Close(); err != nil {
		t.Fatal(err)
	}

	// Window normalization with the singleton rule (μ = 0, σ = 1) in SQL.
	window := func(partition string) string {
		return `SELECT CASE WHEN count(*) OVER w = 1 THEN score / (1 + 1e-6)
		        ELSE (score - avg(score) OVER w) / (stddev_samp(score) OVER w + 1e-6) END
		        FROM t WINDOW w AS (PARTITION BY ` + partition + `) ORDER BY rid`
	}
	rloo := func(partition string) string {
		return `SELECT CASE WHEN count(*) OVER w = 1 THEN 0
		        ELSE score - (sum(score) OVER w - score) / (count(*) OVER w - 1) END
		        FROM t WINDOW w AS (PARTITION BY ` + partition + `) ORDER BY rid`
	}
	for _, tc := range []struct{ name, query string }{
		{"drmas", window("g, agent")},
		{"grpo_step", window("g")},
		{"drmas_nostd", `SELECT CASE WHEN count(*) OVER w = 1 THEN score ELSE score - avg(score) OVER w END
		                 FROM t WINDOW w AS (PARTITION BY g, agent) ORDER BY rid`},
		{"rloo", rloo("g")},
		{"rloo_agent", rloo("g, agent")},
		{"grpo", `WITH tm AS (SELECT g, traj, avg(score) AS rbar FROM t GROUP BY g, traj),
		          gs AS (SELECT g, count(*) AS n, avg(rbar) AS mu, stddev_samp(rbar) AS sd FROM tm GROUP BY g)
		          SELECT CASE WHEN gs.n = 1 THEN tm.rbar / (1 + 1e-6) ELSE (tm.rbar - gs.mu) / (gs.sd + 1e-6) END
		          FROM t JOIN tm USING (g, traj) JOIN gs USING (g) ORDER BY t.rid`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec, err := ParseSpec(tc.name)
			if err != nil {
				t.Fatal(err)
			}
			var out Result
			if err := Compute(ctx, spec, cols, &out); err != nil {
				t.Fatal(err)
			}
			rows, err := db.QueryContext(ctx, tc.query)
			if err != nil {
				t.Fatal(err)
			}
			defer rows.Close()
			i, worst := 0, 0.0
			for rows.Next() {
				var a float64
				if err := rows.Scan(&a); err != nil {
					t.Fatal(err)
				}
				d := math.Abs(float64(out.Advantage[i])-a) / math.Max(1, math.Abs(a))
				worst = max(worst, d)
				if d > 1e-6 {
					t.Fatalf("row %d: Compute %v, DuckDB %v", i, out.Advantage[i], a)
				}
				i++
			}
			if err := rows.Err(); err != nil {
				t.Fatal(err)
			}
			if i != len(cols.Score) {
				t.Fatalf("DuckDB returned %d rows, want %d", i, len(cols.Score))
			}
			t.Logf("%s: %d rows, worst relative difference %.3g", tc.name, i, worst)
		})
	}
}
