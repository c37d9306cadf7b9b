package kubenode

import (
	"os"
	"os/signal"
	"syscall"
)

// PauseCommand is the hidden mode in which chaosbench is a pod sandbox's first process (the "pause"
// container every pod holds its namespaces with). No image can be pulled on a machine without a
// registry, so the sandbox image is chaosbench's own binary with this command as its entry point.
const PauseCommand = "pause"

// RunPause holds a pod's namespaces: it sleeps until SIGINT or SIGTERM, and as the first process of a
// pod that shares its process namespace it reaps the zombies its children leave. It returns the exit
// code: 0 when told to stop.
func RunPause(args []string) int {
	if len(args) > 0 {
		os.Stderr.WriteString("chaosbench pause takes no arguments\n")
		return 2
	}
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGINT, syscall.SIGTERM)
	children := make(chan os.Signal, 1)
	signal.Notify(children, syscall.SIGCHLD)
	for {
		select {
		case <-stop:
			return 0
		case <-children:
			for {
				var ws syscall.WaitStatus
				pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
				if pid <= 0 || err != nil {
					break
				}
			}
		}
	}
}
