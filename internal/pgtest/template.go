package pgtest

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// Template is an initialized, never started cluster that servers are copied
// from, so initdb runs once however many servers a test needs. It is safe for
// concurrent use; callers must call Close when done with it (servers started
// from it are independent and keep running).
type Template struct {
	env  *env
	dir  string // holds data/, the initialized cluster
	opts Options
}

// NewTemplate runs initdb once. opts.BinDir and opts.Logf also apply to the
// servers started from the template.
func NewTemplate(ctx context.Context, opts Options) (*Template, error) {
	env, err := newEnv(opts)
	if err != nil {
		return nil, err
	}
	dir, err := env.makeDir("dpproxy-pgtest-template-")
	if err != nil {
		return nil, err
	}
	if err := env.initdb(ctx, dir, &opts); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return &Template{env: env, dir: dir, opts: opts}, nil
}

// Start copies the template into a new directory and starts a server there.
// opts.ExtraConfig and opts.Logf apply; opts.BinDir is ignored (the
// template's binaries are used).
func (t *Template) Start(ctx context.Context, opts Options) (*Server, error) {
	if opts.Logf == nil {
		opts.Logf = t.opts.Logf
	}
	base, err := t.env.makeDir("dpproxy-pgtest-")
	if err != nil {
		return nil, err
	}
	began := time.Now()
	if err := t.env.copyTree(filepath.Join(t.dir, "data"), filepath.Join(base, "data")); err != nil {
		os.RemoveAll(base)
		return nil, fmt.Errorf("pgtest: copy template: %w", err)
	}
	opts.logf("pgtest: copied template to %s in %v", base, time.Since(began).Round(time.Millisecond))
	return t.env.start(ctx, base, &opts)
}

// Close removes the template directory.
func (t *Template) Close() error {
	if err := os.RemoveAll(t.dir); err != nil {
		return fmt.Errorf("pgtest: remove template: %w", err)
	}
	return nil
}

// copyTree copies the cluster directory src to dst, keeping modes (postgres
// insists on 0700 or 0750 for the data directory) and giving everything to
// the cluster's user.
func (e *env) copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
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
			if err := os.Mkdir(target, info.Mode().Perm()); err != nil {
				return err
			}
			if err := os.Chmod(target, info.Mode().Perm()); err != nil { // umask
				return err
			}
		case d.Type()&fs.ModeSymlink != 0:
			link, err := os.Readlink(p)
			if err != nil {
				return err
			}
			if err := os.Symlink(link, target); err != nil {
				return err
			}
		case d.Type().IsRegular():
			if err := copyFile(p, target, info.Mode().Perm()); err != nil {
				return err
			}
		default:
			return fmt.Errorf("unexpected file type %v at %s", d.Type(), p)
		}
		return e.chown(target)
	})
}

func copyFile(src, dst string, perm fs.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil { // copy_file_range on Linux
		out.Close()
		return err
	}
	if err := out.Close(); err != nil {
		return err
	}
	return os.Chmod(dst, perm)
}
