package nodes

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// Small disks: a node's data directory can live on a file system of its own
// (a size-limited tmpfs, or an ext4 image mounted through a loop device),
// so that the disk-full fault can fill it without touching anything else.
// The file system is mounted on <data>/<id>.disk and the node's data
// directory is <data>/<id>.disk/<id>; the filler file sits next to it.
//
// Under --net netns the harness runs in the mount namespace that `ip netns
// exec` made for it, so its mounts are private to it and to the node
// processes it starts afterwards (each a copy), and they vanish with it.
// On loopback they are mounted in the machine's namespace: a registry file
// (/tmp/sqj-mounts-<pid>) lists them so that --cleanup can unmount what a
// killed harness left.

// Small-disk file system kinds.
const (
	DiskTmpfs = "tmpfs"
	DiskExt4  = "ext4" // an image file, mkfs.ext4, mount -o loop
)

// DiskSpec says which nodes get a small disk.
type DiskSpec struct {
	Nodes map[string]bool // by ID
	Size  int64           // bytes
	Kind  string          // DiskTmpfs or DiskExt4
}

const registryPrefix = "sqj-mounts-"

func registryPath(pid int) string {
	return filepath.Join(os.TempDir(), fmt.Sprintf("%s%d", registryPrefix, pid))
}

// MountDisks mounts the small disks (before the nodes first start). It
// records every mount point in the registry first.
func (c *Cluster) MountDisks() error {
	var errs []error
	for _, n := range c.Nodes {
		if n.DiskDir == "" {
			continue
		}
		if err := os.MkdirAll(n.DiskDir, 0o755); err != nil {
			return err
		}
		if err := appendRegistry(n.DiskDir, n.diskImage); err != nil {
			return err
		}
		if err := mountDisk(n.DiskDir, n.diskImage, c.disk.Kind, c.disk.Size, fmt.Sprintf("sqj-%d-%s", os.Getpid(), n.ID)); err != nil {
			errs = append(errs, fmt.Errorf("small disk for %s: %w", n.ID, err))
			continue
		}
		n.mounted = true
	}
	return errors.Join(errs...)
}

// UnmountDisks unmounts every small disk (the nodes must be stopped) and
// removes the images and the registry.
func (c *Cluster) UnmountDisks() error {
	var errs []error
	have := false
	for _, n := range c.Nodes {
		if n.DiskDir == "" {
			continue
		}
		have = true
		if n.mounted {
			if err := unmount(n.DiskDir); err != nil {
				errs = append(errs, fmt.Errorf("unmount %s: %w", n.DiskDir, err))
				continue
			}
			n.mounted = false
		}
		if n.diskImage != "" {
			_ = os.Remove(n.diskImage)
		}
	}
	if have && len(errs) == 0 {
		_ = os.Remove(registryPath(os.Getpid()))
	}
	return errors.Join(errs...)
}

func appendRegistry(mountPoint, image string) error {
	f, err := os.OpenFile(registryPath(os.Getpid()), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = fmt.Fprintf(f, "%s\t%s\n", mountPoint, image)
	return err
}

func mountDisk(dir, image, kind string, size int64, tag string) error {
	switch kind {
	case DiskTmpfs, "":
		return syscall.Mount(tag, dir, "tmpfs", syscall.MS_NOSUID|syscall.MS_NODEV, fmt.Sprintf("size=%d,mode=0755", size))
	case DiskExt4:
		f, err := os.OpenFile(image, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
		if err != nil {
			return err
		}
		err = f.Truncate(size)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
		// No reserved blocks: the node sees every block of the image.
		if out, err := exec.Command("mkfs.ext4", "-q", "-F", "-m", "0", "-L", tag, image).CombinedOutput(); err != nil {
			return fmt.Errorf("mkfs.ext4: %v: %s", err, strings.TrimSpace(string(out)))
		}
		if out, err := exec.Command("mount", "-o", "loop", image, dir).CombinedOutput(); err != nil {
			return fmt.Errorf("mount -o loop: %v: %s", err, strings.TrimSpace(string(out)))
		}
		return nil
	}
	return fmt.Errorf("unknown small-disk kind %q", kind)
}

// unmount unmounts dir (a loop device mounted by mount(8) is detached with
// it); a busy file system is detached lazily.
func unmount(dir string) error {
	err := syscall.Unmount(dir, 0)
	if errors.Is(err, syscall.EBUSY) {
		err = syscall.Unmount(dir, syscall.MNT_DETACH)
	}
	if errors.Is(err, syscall.EINVAL) { // not mounted (any more)
		err = nil
	}
	return err
}

// MountPoints parses /proc/self/mountinfo content and returns the mount
// points (unescaped).
func MountPoints(mountinfo string) []string {
	var out []string
	sc := bufio.NewScanner(strings.NewReader(mountinfo))
	sc.Buffer(make([]byte, 1<<16), 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 5 {
			continue
		}
		out = append(out, unescapeMount(f[4]))
	}
	return out
}

// unescapeMount undoes the octal escapes (\040 for a space) of mountinfo.
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// CleanupDisks unmounts the small disks of harnesses that are gone (from
// their registry files) and removes their images; it returns what it did.
func CleanupDisks(force bool) (done []string, errs []error) {
	regs, _ := filepath.Glob(filepath.Join(os.TempDir(), registryPrefix+"*"))
	if len(regs) == 0 {
		return nil, nil
	}
	mi, _ := os.ReadFile("/proc/self/mountinfo")
	mounted := map[string]bool{}
	for _, p := range MountPoints(string(mi)) {
		mounted[p] = true
	}
	for _, reg := range regs {
		pid, err := strconv.Atoi(strings.TrimPrefix(filepath.Base(reg), registryPrefix))
		if err == nil && pid > 0 && pid != os.Getpid() && !force && syscall.Kill(pid, 0) == nil {
			continue // its harness is still running
		}
		b, err := os.ReadFile(reg)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		failed := false
		for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			mp, image, _ := strings.Cut(line, "\t")
			if mp == "" {
				continue
			}
			if mounted[mp] {
				if err := unmount(mp); err != nil {
					errs = append(errs, fmt.Errorf("unmount %s: %w", mp, err))
					failed = true
					continue
				}
				done = append(done, "unmounted "+mp)
			}
			if image != "" {
				if _, err := os.Stat(image); err == nil {
					// A loop device still attached to it (its mount
					// namespace is gone) is detached too.
					if out, err := exec.Command("losetup", "-j", image).Output(); err == nil {
						for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
							if dev, _, ok := strings.Cut(l, ":"); ok {
								_ = exec.Command("losetup", "-d", dev).Run()
								done = append(done, "detached "+dev)
							}
						}
					}
					_ = os.Remove(image)
					done = append(done, "removed "+image)
				}
			}
		}
		if !failed {
			_ = os.Remove(reg)
		}
	}
	return done, errs
}

// Fill writes a filler file next to the node's data directory, on its
// small disk, until the file system has no space left. It returns the bytes
// written. The disk stays full until Unfill.
func (n *Node) Fill() (int64, error) {
	if n.DiskDir == "" {
		return 0, fmt.Errorf("%s has no small disk", n.ID)
	}
	f, err := os.OpenFile(n.FillerPath(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	var total int64
	buf := make([]byte, 1<<20)
	for i := range buf {
		buf[i] = 0xA5 // not zeros: nothing may store them sparsely
	}
	// Big writes first, then ever smaller ones, down to one block.
	for size := len(buf); size >= 512; size /= 4 {
		for {
			w, err := f.Write(buf[:size])
			total += int64(w)
			if err == nil {
				continue
			}
			if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
				break
			}
			return total, err
		}
	}
	// ext4 may accept writes into its page cache that it cannot place:
	// flushing makes the file system account for them (and fail if not).
	if err := f.Sync(); err != nil && !errors.Is(err, syscall.ENOSPC) {
		return total, err
	}
	return total, nil
}

// Unfill deletes the filler file, so that space returns.
func (n *Node) Unfill() error {
	if n.DiskDir == "" {
		return nil
	}
	err := os.Remove(n.FillerPath())
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}

// FillerPath is where Fill writes.
func (n *Node) FillerPath() string { return filepath.Join(n.DiskDir, "filler") }

// DiskFree returns the free bytes of the node's small disk.
func (n *Node) DiskFree() (int64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(n.DiskDir, &st); err != nil {
		return 0, err
	}
	return int64(st.Bavail) * int64(st.Bsize), nil
}

// CopyDir copies the tree at src to dst (which must not exist): regular
// files, directories, symbolic links, with their permissions. It is how an
// operator copies a stopped server's data directory aside (cp -a).
func CopyDir(src, dst string) error {
	if _, err := os.Lstat(dst); err == nil {
		return fmt.Errorf("copy %s: %s exists", src, dst)
	}
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			return os.MkdirAll(target, info.Mode().Perm()|0o700)
		case info.Mode()&fs.ModeSymlink != 0:
			link, err := os.Readlink(path)
			if err != nil {
				return err
			}
			return os.Symlink(link, target)
		case info.Mode().IsRegular():
			return copyFile(path, target, info.Mode().Perm())
		}
		return nil // sockets, devices: none in a data directory
	})
}

func copyFile(src, dst string, perm fs.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, perm)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	if err := out.Sync(); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
