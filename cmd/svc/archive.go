package main

import (
	"archive/tar"
	"compress/gzip"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"
)

// skipped is a path left out of an archive, and why.
type skipped struct{ path, why string }

// tarDir writes the tree under dir to w as a tar.gz, for `svc launch`.
// Every read goes through an os.Root on dir, so nothing outside dir is
// read even if the tree changes under the walk. Left out (and returned):
// .git directories, symbolic links whose target leaves dir (absolute, or
// climbing out with ..), and anything that is not a file, directory or
// link (devices, sockets, pipes). Links are stored as links, never
// followed.
func tarDir(dir string, w io.Writer) ([]skipped, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	zw := gzip.NewWriter(w)
	tw := tar.NewWriter(zw)
	var left []skipped
	err = fs.WalkDir(root.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == "." {
			return err
		}
		if d.IsDir() && d.Name() == ".git" {
			left = append(left, skipped{p, "git metadata"})
			return fs.SkipDir
		}
		info, err := root.Lstat(p)
		if err != nil {
			return err
		}
		link := ""
		switch m := info.Mode(); {
		case m.IsDir(), m.IsRegular():
		case m&fs.ModeSymlink != 0:
			if link, err = root.Readlink(p); err != nil {
				return err
			}
			if !linkStaysIn(p, link) {
				left = append(left, skipped{p, "a link to " + link + ", outside the directory"})
				return nil
			}
		default:
			left = append(left, skipped{p, "not a file, directory or link (" + m.Type().String() + ")"})
			return nil
		}
		hdr, err := tar.FileInfoHeader(info, link)
		if err != nil {
			return err
		}
		hdr.Name, hdr.Uname, hdr.Gname, hdr.Uid, hdr.Gid = p, "", "", 0, 0
		if info.IsDir() {
			hdr.Name += "/"
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if !info.Mode().IsRegular() {
			return nil
		}
		return copyFile(tw, root, p, hdr.Size)
	})
	if err != nil {
		return left, fmt.Errorf("archive %s: %w", dir, err)
	}
	if err := tw.Close(); err != nil {
		return left, err
	}
	return left, zw.Close()
}

// copyFile copies exactly size bytes of the file p under root into tw (a
// file that changed size since it was listed is an error, not a corrupt
// archive).
func copyFile(tw *tar.Writer, root *os.Root, p string, size int64) error {
	f, err := root.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	if n, err := io.Copy(tw, io.LimitReader(f, size)); err != nil || n != size {
		return fmt.Errorf("%s: changed while being read (%d of %d bytes): %v", p, n, size, err)
	}
	return nil
}

// linkStaysIn reports whether a link at p (slash-separated, relative to
// the archive's root) to target resolves inside the root, read lexically.
func linkStaysIn(p, target string) bool {
	if target == "" || path.IsAbs(target) || strings.HasPrefix(target, `\`) {
		return false
	}
	j := path.Join(path.Dir(p), target)
	return j != ".." && !strings.HasPrefix(j, "../")
}
