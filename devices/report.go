package devices

import (
	"fmt"
	"io"
	"text/tabwriter"
)

// WriteDevices prints devs as a table.
func WriteDevices(w io.Writer, devs []Device) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "GPU\tNAME\tUUID\tMEMORY FREE / TOTAL\tUTIL\tMEM UTIL")
	for _, d := range devs {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s / %s\t%s\t%s\n", d.Index, d.Name, d.UUID, Bytes(d.MemoryFree), Bytes(d.MemoryTotal), pct(d.Utilization), pct(d.MemoryUtilization))
	}
	return tw.Flush()
}

// StagePlacement is the placement of the jobs that run together in Stages (e.g.
// "rollout, evaluate").
type StagePlacement struct {
	Stages string
	Placement
}

// WritePlacements prints placements as one table.
func WritePlacements(w io.Writer, ps ...StagePlacement) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "STAGES\tJOB\tWHERE\tWHY")
	for _, p := range ps {
		for _, a := range p.Assignments {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", p.Stages, a.Job.Name, a.Where(), a.Reason)
		}
	}
	return tw.Flush()
}

func pct(v int) string {
	if v < 0 {
		return "-"
	}
	return fmt.Sprintf("%d%%", v)
}
