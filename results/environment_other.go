//go:build !linux

package results

func fileSystemType(string) string { return "" }
