package chaosbench

import (
	"os"

	"github.com/etcd-chaosbench/chaosbench/clusters"
	"github.com/etcd-chaosbench/chaosbench/clusters/kubenode"
	"github.com/etcd-chaosbench/chaosbench/clusters/slowfs"
)

// HiddenCommand is a mode in which chaosbench re-executes itself as a helper process: the binary is its own
// etcd member, container watchdog and FUSE server, so that one static file is all a host or an image needs.
// The clusters start these processes with the command line they expect; the CLI only has to register every
// one of them under its Name, keep it out of the help and hand it its arguments unparsed (they are etcd's
// flags, or the helper's own).
type HiddenCommand struct {
	// Name is the subcommand the helper is started with (os.Args[1]).
	Name string
	// Args describes its arguments in the command's usage line ("" for none shown).
	Args string
	// Short says what the helper does, for `chaosbench help NAME`.
	Short string
	// Main runs the helper with the arguments after Name and returns the process's exit code.
	Main func(args []string) int
}

// HiddenCommands returns the helper modes chaosbench must answer to: an embedded cluster's etcd member, a
// docker cluster's watchdog that removes its containers when chaosbench dies, the slow-disk filesystem
// under a member's data directory, and the first process of the local Kubernetes node's pod sandboxes.
// A new list is returned on every call: there is no registry to mutate.
func HiddenCommands() []HiddenCommand {
	return []HiddenCommand{
		{
			Name:  clusters.MemberCommand,
			Args:  "[etcd flags]",
			Short: "Run one etcd member (internal: started by chaosbench itself)",
			Main: func(args []string) int {
				// RunMember returns only if etcd does without exiting the process itself.
				clusters.RunMember(args)
				return 0
			},
		},
		{
			Name:  clusters.ReaperCommand,
			Short: "Remove a docker cluster's containers when its chaosbench process dies (internal)",
			Main:  clusters.RunReaper,
		},
		{
			Name:  slowfs.Command,
			Args:  "[flags]",
			Short: "Serve a member's slow-disk filesystem (internal: started by chaosbench itself)",
			Main: func(args []string) int {
				// The embedded cluster talks to the filesystem over the pipes it gave the process as its
				// standard input and output, not over anything the CLI writes to.
				return slowfs.Main(args, os.Stdin, os.Stdout)
			},
		},
		{
			Name:  kubenode.PauseCommand,
			Short: "Hold a pod's namespaces as its sandbox's first process (internal: the local node's pause image)",
			Main:  kubenode.RunPause,
		},
	}
}
