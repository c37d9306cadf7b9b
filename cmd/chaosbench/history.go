package main

import (
	"io"

	"github.com/spf13/cobra"

	"github.com/etcd-chaosbench/chaosbench"
)

func historyCommand(stdout io.Writer, code *int) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "history",
		Short: "Read a recorded history: dump it as JSON lines, convert a legacy run's JSON lines",
	}
	var dump chaosbench.HistoryDumpOptions
	dumpCmd := &cobra.Command{
		Use:   "dump DIR|FILE",
		Short: "Print a run's history (history.bin, or watch.bin with --watches) as JSON lines",
		Long: "Dump prints every operation of a run directory's history, or of a history file, as one JSON object\n" +
			"per line, with the fields of the legacy history.jsonl (see results/SCHEMA.md): for jq and other tools.\n" +
			"A watch file, or --watches with a directory, prints the watch records.",
		Args: cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			dump.Path, dump.Out = args[0], stdout
			err := chaosbench.HistoryDump(dump)
			*code = chaosbench.ExitCode(err)
			return err
		},
	}
	dumpCmd.Flags().BoolVar(&dump.Watches, "watches", false, "dump the watch records of a run directory instead of its operations")
	convertCmd := &cobra.Command{
		Use:   "convert DIR",
		Short: "Write the binary history of a run recorded before it (history.jsonl, watch.jsonl)",
		Long: "Convert writes history.bin and watch.bin from a legacy run directory's JSON lines, which it keeps.\n" +
			"Every command reads legacy runs as they are; a converted run is a tenth of the size and faster to check.",
		Args: cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			err := chaosbench.HistoryConvert(args[0], stdout)
			*code = chaosbench.ExitCode(err)
			return err
		},
	}
	cmd.AddCommand(dumpCmd, convertCmd)
	return cmd
}
