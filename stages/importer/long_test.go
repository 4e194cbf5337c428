package importer_test

import (
	"context"
	"strings"
	"testing"

	"github.com/drmas-dev/drmas/stages/importer"
)

// An error about a huge value quotes its start and says how long it is, rather than copying
// megabytes into the message.
func TestImportErrorsCutLongValues(t *testing.T) {
	long := strings.Repeat("u", 1<<20)
	path := writeFile(t, "long.jsonl",
		`{"uid":"`+long+`","traj_uid":"t","agent":"s","step":0,"score":1}`+"\n"+
			`{"uid":"v","traj_uid":"t","agent":"s","step":1,"score":1}`+"\n"+
			`{"uid":"v","traj_uid":"w","agent":"`+long+` ","step":0,"score":1}`+"\n")
	_, err := importer.Run(context.Background(), newEnv(t), importer.Options{Path: path, Iteration: 0})
	if err == nil {
		t.Fatal("imported a traj_uid under two uids")
	}
	msg := err.Error()
	if len(msg) > 1000 || !strings.Contains(msg, "(1048576 bytes)") || !strings.Contains(msg, "(1048577 bytes) has leading or trailing spaces") {
		t.Fatalf("error of %d bytes: %.300q", len(msg), msg)
	}
}
