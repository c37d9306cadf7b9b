//go:build !linux

package results

func fileSystemType(string) string { return "" }

func diskOf(string) *Disk { return nil }

func cgroupLimits() (float64, int64) { return 0, 0 }
