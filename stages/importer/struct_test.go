package importer_test

import (
	"context"
	"strings"
	"testing"

	"github.com/drmas-dev/drmas/stages/importer"
)

// A column that is a struct of one field is refused, not read as that field.
func TestImportRefusesAStructOfOneField(t *testing.T) {
	type name struct {
		Name string `parquet:"name"`
	}
	type row struct {
		UID     string  `parquet:"uid"`
		TrajUID string  `parquet:"traj_uid"`
		Agent   name    `parquet:"agent"`
		Step    int32   `parquet:"step"`
		Score   float64 `parquet:"score"`
	}
	env := newEnv(t)
	path := writeParquet(t, "struct.parquet", []row{{"u", "t", name{"solver"}, 0, 1}})
	_, err := importer.Run(context.Background(), env, importer.Options{Path: path, Iteration: 0})
	if err == nil || !strings.Contains(err.Error(), `column "agent" is a struct (agent.name), want a string`) {
		t.Fatalf("got %v", err)
	}
	if ks := keys(t, env.Bucket); len(ks) != 0 {
		t.Fatalf("wrote %q", ks)
	}
}
