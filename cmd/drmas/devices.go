package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/drmas-dev/drmas/devices"
)

func newDevicesCmd() *cobra.Command {
	var assume []string
	cmd := &cobra.Command{
		Use:   "devices",
		Short: "List NVIDIA GPUs (NVML) and where the config's models would fit",
		Long: `Lists the GPUs NVML reports (index, name, UUID, free/total memory, utilisation) and plans
where the configured models would run: one actor backend per model served in process
(rollout, evaluate) and one learner per trained model (learn, warmup), placed by estimated
float32 memory, first-fit decreasing; what fits on no GPU runs on the CPU engine. Actors and
learners are placed separately: they run in different stages.

On a machine without the NVIDIA driver it prints one line and exits 0 (CPU mode).
--assume plans for hypothetical GPUs instead, given their free memory.`,
		Example: `  drmas devices
  drmas devices --config cfg.yaml --assume 80Gi,80Gi`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			out := cmd.OutOrStdout()
			var devs []devices.Device
			if len(assume) > 0 {
				for i, a := range assume {
					q, err := resource.ParseQuantity(strings.TrimSpace(a))
					if err != nil || q.Sign() <= 0 {
						return fmt.Errorf("--assume %q: want a memory size such as 80Gi", a)
					}
					n := uint64(q.Value())
					devs = append(devs, devices.Device{Index: i, Name: "assumed", MemoryTotal: n, MemoryFree: n, Utilization: -1, MemoryUtilization: -1})
				}
			} else {
				var err error
				devs, err = devices.Discover()
				if errors.Is(err, devices.ErrNoDriver) {
					fmt.Fprintln(out, devices.CPUModeLine(err))
					return nil
				}
				if err != nil && len(devs) == 0 {
					return err
				}
				if err != nil {
					fmt.Fprintln(cmd.ErrOrStderr(), "drmas: warning:", err)
				}
			}
			if err := devices.WriteDevices(out, devs); err != nil {
				return err
			}
			cfg, err := loadConfig(cmd)
			if err != nil {
				return err
			}
			actors, learners := devices.Plan(cfg)
			fmt.Fprintf(out, "\nplacement for run %s (float32 memory estimates):\n", cfg.Run)
			pa, err := devices.Place(devs, actors)
			if err != nil {
				return err
			}
			pl, err := devices.Place(devs, learners)
			if err != nil {
				return err
			}
			return devices.WritePlacements(out,
				devices.StagePlacement{Stages: "rollout, evaluate", Placement: pa},
				devices.StagePlacement{Stages: "learn, warmup", Placement: pl})
		},
	}
	cmd.Flags().StringSliceVar(&assume, "assume", nil, "plan for hypothetical GPUs with this free memory each, comma-separated (e.g. 80Gi,24Gi)")
	return cmd
}
