package results

import "syscall"

// fileSystemType names the file system dir lives on, for those etcd data directories usually live on
// (statfs(2) f_type).
func fileSystemType(dir string) string {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return ""
	}
	switch uint32(st.Type) {
	case 0xEF53:
		return "ext4"
	case 0x58465342:
		return "xfs"
	case 0x9123683E:
		return "btrfs"
	case 0x01021994:
		return "tmpfs"
	case 0x794C7630:
		return "overlayfs"
	case 0x65735546:
		return "fuse"
	case 0x2FC12FC1:
		return "zfs"
	case 0x6969:
		return "nfs"
	case 0xFF534D42:
		return "cifs"
	case 0x858458F6:
		return "ramfs"
	case 0xF2F52010:
		return "f2fs"
	}
	return "unknown"
}
