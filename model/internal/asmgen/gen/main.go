// Command gen writes the model package's generated assembly (package asmgen) into -dir.
package main

import (
	"flag"
	"log"
	"os"
	"path/filepath"

	"github.com/drmas-dev/drmas/model/internal/asmgen"
)

func main() {
	dir := flag.String("dir", ".", "the model package's directory")
	flag.Parse()
	for name, text := range asmgen.Files() {
		if err := os.WriteFile(filepath.Join(*dir, name), []byte(text), 0o644); err != nil {
			log.Fatalf("asmgen: %v", err)
		}
	}
}
