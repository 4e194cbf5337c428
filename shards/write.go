package shards

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress/zstd"
)

// RowGroupRows is the number of rows per Parquet row group. Fixed so that output bytes do not
// depend on anything but the rows.
const RowGroupRows = 32 * 1024

func writerOptions() []parquet.WriterOption {
	return []parquet.WriterOption{
		parquet.Compression(&zstd.Codec{Level: zstd.SpeedDefault}),
		parquet.CreatedBy("drmas", fmt.Sprint(SchemaVersion), "none"),
		parquet.MaxRowsPerRowGroup(RowGroupRows),
		parquet.PageBufferSize(1 << 20),
	}
}

// CheckPart reports every way rows fail to form part `part` of a trajectory iteration: row ids
// must be RowID(part, i), rows sorted by (uid, sample, step) with one uid's rows contiguous,
// scores and response log-probs finite, keys present. (The order of agents within a step is the workflow's, which
// this package does not know.) At most ten problems are listed, then a count.
func CheckPart(part int, rows []Row) error {
	var errs []error
	extra := 0
	add := func(err error) {
		if len(errs) < 10 {
			errs = append(errs, err)
		} else {
			extra++
		}
	}
	seen := make(map[string]int, len(rows)/8+1)
	for i := range rows {
		r := &rows[i]
		if want := RowID(part, i); r.RowID != want {
			add(fmt.Errorf("row %d: row_id %d, want %d (part %d, position %d)", i, r.RowID, want, part, i))
		}
		if r.UID == "" || r.Agent == "" || r.TrajUID == "" {
			add(fmt.Errorf("row %d: uid, traj_uid and agent must be set (uid=%q traj_uid=%q agent=%q)", i, r.UID, r.TrajUID, r.Agent))
		}
		if math.IsNaN(r.Score) || math.IsInf(r.Score, 0) {
			add(fmt.Errorf("row %d: score %v is not finite", i, r.Score))
		}
		if math.IsNaN(r.EpisodeReward) || math.IsInf(r.EpisodeReward, 0) {
			add(fmt.Errorf("row %d: episode_reward %v is not finite", i, r.EpisodeReward))
		}
		if len(r.ResponseLogprobs) != 0 && len(r.ResponseLogprobs) != len(r.ResponseIDs) {
			add(fmt.Errorf("row %d: %d response log-probs for %d response tokens", i, len(r.ResponseLogprobs), len(r.ResponseIDs)))
		}
		for j, lp := range r.ResponseLogprobs {
			if math.IsNaN(float64(lp)) || math.IsInf(float64(lp), 0) {
				add(fmt.Errorf("row %d: response log-prob %d is %v, want a finite number (a sampled token has probability > 0)", i, j, lp))
				break
			}
		}
		if i > 0 && rows[i-1].UID == r.UID {
			if p := &rows[i-1]; r.Sample < p.Sample || (r.Sample == p.Sample && r.Step < p.Step) {
				add(fmt.Errorf("row %d: (sample %d, step %d) after (sample %d, step %d) in uid %q: rows must be sorted by (uid, sample, step)", i, r.Sample, r.Step, p.Sample, p.Step, r.UID))
			}
			continue
		}
		if j, dup := seen[r.UID]; dup {
			add(fmt.Errorf("row %d: uid %q already ended at row %d: rows of one uid must be contiguous", i, r.UID, j))
		} else if i > 0 && r.UID < rows[i-1].UID {
			add(fmt.Errorf("row %d: uid %q after %q: rows must be sorted by uid", i, r.UID, rows[i-1].UID))
		}
		seen[r.UID] = i
	}
	if extra > 0 {
		errs = append(errs, fmt.Errorf("and %d more problems", extra))
	}
	return errors.Join(errs...)
}

// WriteTrajectories encodes rows as part `part` of an iteration after checking them with
// CheckPart. The same rows always produce the same bytes.
func WriteTrajectories(w io.Writer, part int, rows []Row) error {
	if err := CheckPart(part, rows); err != nil {
		return fmt.Errorf("invalid trajectory rows: %w", err)
	}
	return writeRows(w, rows)
}

// WriteAdvantages encodes a sidecar. rows must be row-aligned with their rollout part.
func WriteAdvantages(w io.Writer, rows []AdvantageRow) error {
	for i := range rows {
		a := rows[i].Advantage
		if math.IsNaN(float64(a)) || math.IsInf(float64(a), 0) {
			return fmt.Errorf("advantage row %d (row_id %d): advantage %v is not finite", i, rows[i].RowID, a)
		}
	}
	return writeRows(w, rows)
}

// WriteTable encodes any rows of a struct type with drmas's deterministic writer settings
// (diagnostics, metrics, evaluations).
func WriteTable[T any](w io.Writer, rows []T) error { return writeRows(w, rows) }

func writeRows[T any](w io.Writer, rows []T) error {
	pw := parquet.NewGenericWriter[T](w, writerOptions()...)
	for off := 0; off < len(rows); off += RowGroupRows {
		end := min(off+RowGroupRows, len(rows))
		if _, err := pw.Write(rows[off:end]); err != nil {
			return fmt.Errorf("write parquet rows: %w", err)
		}
		if err := pw.Flush(); err != nil {
			return fmt.Errorf("flush parquet row group: %w", err)
		}
	}
	if err := pw.Close(); err != nil {
		return fmt.Errorf("close parquet writer: %w", err)
	}
	return nil
}

// EncodeTable is WriteTable into memory.
func EncodeTable[T any](rows []T) ([]byte, error) {
	var buf bytes.Buffer
	if err := writeRows(&buf, rows); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
