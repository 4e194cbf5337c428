// Package importer turns trajectories produced elsewhere (another RL framework) into a
// committed rollout iteration of a run, so they can be reanalysed like drmas's own: normalized
// with any estimator, joined with DuckDB, compared across runs.
//
// The input is one JSONL or Parquet file with one row per agent invocation (docs/design.md, "Shard schemas"):
// required uid, traj_uid, agent, step, score; the other trajectory columns are optional with
// defaults (see Columns). The whole file is validated before anything is written: every
// problem is reported at once (the first MaxProblems, then a count) naming the file and the
// JSONL line (from 1) or Parquet row (from 0), and on any problem the store is left untouched.
//
// Then rows are sorted by (uid, sample, step, agent in first-seen order), uids are assigned to
// parts as contiguous ranges balanced by row count (a uid never split), and the parts are
// written with shards.WriteTrajectories under layout.RolloutDir and committed with a "rollout"
// manifest whose ConfigDigest is the sha256 of the input file and whose Params record the
// source, "imported": "true" and the policy_version. Importing the same file again is a no-op;
// importing other content into a committed iteration is a conflict (commit.ErrConflict), and
// that is checked before any part is written. (Two imports of different files racing into the
// same iteration can still both pass that check; commit.PutFile and commit.Commit then leave
// the iteration committed with one file's parts, whole, or not committed, never a mix.)
//
// Memory: the whole file and all its rows are held in memory (plus the encoded parts, which
// are compressed): about 1 KB per row, whatever the file's size (a compressed Parquet file can
// hold several tiny rows per byte). The Parquet reader never allocates from the footer's
// counts beyond what the file size allows, and refuses a footer above shards.MaxFooterBytes
// (a file of very many small row groups).
package importer

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/drmas-dev/drmas/commit"
	"github.com/drmas-dev/drmas/configs"
	"github.com/drmas-dev/drmas/layout"
	"github.com/drmas-dev/drmas/shards"
	"github.com/drmas-dev/drmas/stages"
)

// DefaultDataSource is the data_source of rows whose input has none.
const DefaultDataSource = "imported"

// Formats.
const (
	JSONL   = "jsonl"
	Parquet = "parquet"
)

// Options select what to import where.
type Options struct {
	// Path is the input file.
	Path string
	// Iteration is the iteration of the run (env.Config.Run) to commit the rollout as.
	Iteration int
	// Parts is the number of parts to write (0: rollout.parts of the config); fewer are
	// written when the file has fewer uids.
	Parts int
	// Format is "jsonl" or "parquet"; empty: from the extension (.jsonl, .ndjson, .json;
	// .parquet, .pq).
	Format string
	// ScoreColumn names the input column read as score (default "score"), e.g. "reward".
	ScoreColumn string
}

// Result summarises an import.
type Result struct {
	Dir           string // the committed rollout folder
	Skipped       bool   // the same file was already imported there: nothing written
	Rows          int64
	Parts         int
	Groups        int // distinct uids
	Trajectories  int // distinct traj_uids
	Agents        []string
	PolicyVersion int64  // the largest policy_version
	SHA256        string // of the input file
}

// Column describes an accepted input column, for help texts.
type Column struct {
	Name     string
	Type     string
	Required bool
}

// Columns lists the accepted input columns in their canonical order.
func Columns() []Column {
	var out []Column
	for _, c := range columns("score") {
		out = append(out, Column{Name: c.name, Type: c.kind.String(), Required: c.required})
	}
	return out
}

// DetectFormat resolves the format of path: explicit if given, else from the extension.
func DetectFormat(path, explicit string) (string, error) {
	switch strings.ToLower(explicit) {
	case JSONL:
		return JSONL, nil
	case Parquet:
		return Parquet, nil
	case "":
	default:
		return "", fmt.Errorf("unknown format %q (want jsonl or parquet)", explicit)
	}
	switch strings.ToLower(filepath.Ext(path)) {
	case ".jsonl", ".ndjson", ".json":
		return JSONL, nil
	case ".parquet", ".pq":
		return Parquet, nil
	}
	return "", fmt.Errorf("%s: cannot tell the format from the extension (want .jsonl or .parquet, or give --format)", path)
}

// read parses and validates an input file. It returns the records in file order, the agents
// in first-seen order, or a *ValidationError.
func read(ctx context.Context, data []byte, path, format, scoreCol string) ([]rec, []string, error) {
	cols := columns(scoreCol)
	p := &problems{e: ValidationError{File: path, Unit: "line"}}
	if format == Parquet {
		p.e.Unit = "row"
	}
	c := newChecker(p.e.Unit, p)
	var (
		recs []rec
		err  error
	)
	if format == Parquet {
		recs, err = readParquet(ctx, data, path, cols, p, c)
	} else {
		recs, err = readJSONL(ctx, data, cols, p, c)
	}
	if err != nil {
		return nil, nil, err
	}
	if p.e.Total == 0 && len(recs) == 0 {
		p.add(-1, "no rows")
	}
	if err := p.err(); err != nil {
		return nil, nil, err
	}
	return recs, c.agents, nil
}

// Run imports o.Path as the rollout of iteration o.Iteration of env.Config.Run. Its errors name
// the stage once ("import FILE into iter N: …", a *stages.Error).
func Run(ctx context.Context, env *stages.Env, o Options) (*Result, error) {
	res, err := runStage(ctx, env, o)
	if err != nil {
		return nil, stages.Fail(ctx, fmt.Sprintf("import %s into iter %d", o.Path, o.Iteration), err)
	}
	return res, nil
}

func runStage(ctx context.Context, env *stages.Env, o Options) (*Result, error) {
	cfg := env.Config
	format, scoreCol, err := checkOptions(cfg.Run, o)
	if err != nil {
		return nil, err
	}
	data, err := os.ReadFile(o.Path)
	if err != nil {
		return nil, err
	}
	recs, agents, err := read(ctx, data, o.Path, format, scoreCol)
	if err != nil {
		return nil, err
	}
	res := &Result{Dir: layout.RolloutDir(cfg.Run, o.Iteration), Rows: int64(len(recs)), Agents: agents, SHA256: commit.Digest(data)}
	rows, groupRows := sortedRows(cfg, o.Iteration, recs, res)
	recs = nil

	parts := o.Parts
	if parts == 0 {
		parts = max(cfg.Rollout.Parts, 1)
	}
	parts = min(parts, len(groupRows))
	res.Parts = parts
	files, encoded, err := encodeParts(ctx, rows, groupRows, parts)
	if err != nil {
		return nil, err
	}
	iter := o.Iteration
	m := &commit.Manifest{
		Kind: "rollout", SchemaVersion: shards.SchemaVersion, Run: cfg.Run, Iteration: &iter,
		Rows: res.Rows, Files: files, ConfigDigest: res.SHA256,
		Params: map[string]string{
			"source": filepath.Base(o.Path), "imported": "true",
			"policy_version": strconv.FormatInt(res.PolicyVersion, 10),
		},
	}
	return commitImport(ctx, env, o.Path, res, m, encoded)
}

// checkOptions validates o before the file is read and returns its format and score column.
func checkOptions(run string, o Options) (format, scoreCol string, err error) {
	if err := layout.ValidateRunName(run); err != nil {
		return "", "", err
	}
	if o.Iteration < 0 || o.Iteration > math.MaxInt32 {
		return "", "", fmt.Errorf("iteration %d is out of range (0 to %d)", o.Iteration, math.MaxInt32)
	}
	if o.Parts < 0 {
		return "", "", fmt.Errorf("parts %d is negative", o.Parts)
	}
	format, err = DetectFormat(o.Path, o.Format)
	if err != nil {
		return "", "", err
	}
	scoreCol = o.ScoreColumn
	if scoreCol == "" {
		scoreCol = "score"
	}
	for _, c := range columns("score") {
		if c.name == scoreCol && c.name != "score" && c.kind != kFloat {
			return "", "", fmt.Errorf("score column %q is an input column of another type (%s)", scoreCol, c.kind)
		}
	}
	return format, scoreCol, nil
}

// sortedRows is the rows of recs sorted by (uid, sample, step, agent order), filled with the
// run, the iteration and the model the learner trains for each agent, and the number of rows
// of each uid in that order; it sets res's policy version, groups and trajectories. The sort
// key is unique (no duplicate (traj_uid, step, agent), and traj_uid ↔ (uid, sample) is
// one-to-one).
func sortedRows(cfg *configs.Config, iteration int, recs []rec, res *Result) ([]shards.Row, []int) {
	agentCode := make(map[string]int, len(res.Agents))
	for i, a := range res.Agents {
		agentCode[a] = i
	}
	idx := make([]int, len(recs))
	for i := range idx {
		idx[i] = i
	}
	sort.Slice(idx, func(x, y int) bool {
		a, b := &recs[idx[x]].row, &recs[idx[y]].row
		if a.UID != b.UID {
			return a.UID < b.UID
		}
		if a.Sample != b.Sample {
			return a.Sample < b.Sample
		}
		if a.Step != b.Step {
			return a.Step < b.Step
		}
		return agentCode[a.Agent] < agentCode[b.Agent]
	})
	rows := make([]shards.Row, len(recs))
	trajs := map[string]bool{}
	var groupRows []int // rows per uid, in sorted order
	for i, j := range idx {
		rows[i] = recs[j].row
		if a, ok := cfg.Agents[rows[i].Agent]; ok && !recs[j].hasModel {
			rows[i].Model = a.Model // the model the learner trains for this agent
		}
		rows[i].Run = cfg.Run
		rows[i].Iteration = int32(iteration)
		res.PolicyVersion = max(res.PolicyVersion, rows[i].PolicyVersion)
		trajs[rows[i].TrajUID] = true
		if i == 0 || rows[i].UID != rows[i-1].UID {
			groupRows = append(groupRows, 0)
		}
		groupRows[len(groupRows)-1]++
	}
	res.Groups, res.Trajectories = len(groupRows), len(trajs)
	return rows, groupRows
}

// encodeParts encodes rows as parts Parquet parts of whole uids (Partition of groupRows) and
// returns their manifest entries and bytes.
func encodeParts(ctx context.Context, rows []shards.Row, groupRows []int, parts int) ([]commit.File, [][]byte, error) {
	bounds := Partition(groupRows, parts)
	var (
		files   []commit.File
		encoded [][]byte
	)
	lo := 0
	for p := 0; p < parts; p++ {
		if err := ctx.Err(); err != nil {
			return nil, nil, err
		}
		hi := lo
		for g := bounds[p]; g < bounds[p+1]; g++ {
			hi += groupRows[g]
		}
		part := rows[lo:hi]
		for i := range part {
			part[i].RowID = shards.RowID(p, i)
		}
		var buf bytes.Buffer
		if err := shards.WriteTrajectories(&buf, p, part); err != nil {
			return nil, nil, fmt.Errorf("part %d: %w", p, err)
		}
		encoded = append(encoded, buf.Bytes())
		files = append(files, commit.File{Name: shards.PartName(p, parts), Rows: int64(len(part)),
			Bytes: int64(buf.Len()), SHA256: commit.Digest(buf.Bytes())})
		lo = hi
	}
	return files, encoded, nil
}

// commitImport writes the encoded parts of m into res.Dir and commits it, unless the folder is
// committed already: with the same content (from src, or from a file of another name) the
// import is skipped, with other content it is refused.
func commitImport(ctx context.Context, env *stages.Env, src string, res *Result, m *commit.Manifest, encoded [][]byte) (*Result, error) {
	want, err := commit.Encode(m)
	if err != nil {
		return nil, err
	}
	// Check for a committed iteration before writing: overwriting the parts of a committed
	// folder with other content would corrupt it.
	old, oldSHA, err := commit.Read(ctx, env.Bucket, res.Dir)
	switch {
	case err == nil && oldSHA == commit.Digest(want):
		env.Logf("import %s: already imported as %s", src, res.Dir)
		res.Skipped = true
		return res, nil
	case err == nil && sameButSource(old, m.Params["source"], want):
		env.Logf("import %s: already imported as %s (from %s, the same content)", src, res.Dir, old.Params["source"])
		res.Skipped = true
		return res, nil
	case err == nil:
		return nil, &stages.TakenError{Stage: "import", Dir: res.Dir,
			What: fmt.Sprintf("%s is already committed with different content (%s; this file: sha256 %.12s, %d rows, %d parts)", res.Dir, describeManifest(old), res.SHA256, res.Rows, res.Parts)}
	case !errors.Is(err, commit.ErrNotCommitted):
		return nil, err
	}
	for p, data := range encoded {
		// The returned entry carries the upload's ETag, which spares Commit reading it back.
		if m.Files[p], err = commit.PutFile(ctx, env.Bucket, res.Dir, m.Files[p].Name, data, m.Files[p].Rows); err != nil {
			return nil, err
		}
	}
	if _, err := commit.Commit(ctx, env.Bucket, res.Dir, m); err != nil {
		return nil, err
	}
	env.Logf("import %s: %d rows, %d uids, %d trajectories, agents %s → %s (%d parts)",
		src, res.Rows, res.Groups, res.Trajectories, strings.Join(res.Agents, ","), res.Dir, res.Parts)
	return res, nil
}

// sameButSource reports whether the committed manifest old is want (encoded) but for the
// name of the file it was imported from, which want names source: the same content imported
// from a file of another name.
func sameButSource(old *commit.Manifest, source string, want []byte) bool {
	if old.Params["imported"] != "true" {
		return false
	}
	renamed := *old
	renamed.Params = maps.Clone(old.Params)
	renamed.Params["source"] = source
	data, err := commit.Encode(&renamed)
	return err == nil && bytes.Equal(data, want)
}

func describeManifest(m *commit.Manifest) string {
	if m.Params["imported"] == "true" {
		return fmt.Sprintf("imported from %s, sha256 %.12s, %d rows, %d parts", m.Params["source"], m.ConfigDigest, m.Rows, len(m.Files))
	}
	return fmt.Sprintf("a %s of %d rows in %d parts, not imported", m.Kind, m.Rows, len(m.Files))
}

// Partition splits groups (given their row counts, in order) into parts contiguous ranges
// balanced by row count: part p holds groups [b[p], b[p+1]). Every part gets at least one
// group; parts must be in [1, len(rows)].
func Partition(rows []int, parts int) []int {
	g := len(rows)
	cum := make([]int64, g+1)
	for i, n := range rows {
		cum[i+1] = cum[i] + int64(n)
	}
	total := cum[g]
	b := make([]int, parts+1)
	b[parts] = g
	dist := func(j, p int) int64 {
		d := cum[j]*int64(parts) - int64(p)*total
		if d < 0 {
			return -d
		}
		return d
	}
	for p := 1; p < parts; p++ {
		best := b[p-1] + 1
		for j := best; j <= g-(parts-p); j++ {
			if dist(j, p) < dist(best, p) {
				best = j
			}
			if cum[j]*int64(parts) >= int64(p)*total {
				break
			}
		}
		b[p] = best
	}
	return b
}
