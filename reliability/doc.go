// Package reliability holds drmas's cross-cutting fault, crash and concurrency tests; it has
// no code of its own.
//
// The tests exercise the guarantees the whole pipeline rests on (docs/design.md, "Commit protocol" and "Learner"): a stage
// reads only committed inputs and commits its outputs with a _MANIFEST.json written last, and
// checkpoints move LATEST only after their manifest. They check that those guarantees survive:
//
//   - storage faults against a real MinIO server (storage/miniotest): the server stopped in the
//     middle of a multipart upload and in the middle of rollout, normalize and learn, or the
//     connections reset or stalled by a TCP proxy the test controls. The stage must fail fast
//     with an error naming the endpoint or key, a rerun after the server is back must finish,
//     and the store must hold no partial objects (everything listed is committed or in an
//     uncommitted folder that readers ignore), no incomplete multipart uploads, and outputs
//     byte-identical to a run without faults;
//   - SIGKILL of the drmas binary at seeded random points of every stage and of `drmas run`,
//     followed by a rerun: outputs byte-identical to an uninterrupted run, and LATEST never
//     names a step that does not load. Every stage on the folder store; `drmas run` (with
//     checkpoint retention deleting steps) on MinIO too, compared with the folder store;
//   - concurrent writers (two processes running the same stage, goroutines racing commits of
//     different manifests) on the folder store and on MinIO: one wins, the other confirms
//     identical content or reports commit.ErrConflict, and no committed folder is torn; two
//     `drmas run` processes on the same run on MinIO both finish with the outputs of one run;
//   - secrets: an unreachable S3 endpoint fails within a bounded time, names the endpoint,
//     and never prints the secret key.
//
// The MinIO tests are skipped when no minio binary is found (see storage/miniotest), except
// under CI=true. `go test -short` runs fewer kill trials.
package reliability
