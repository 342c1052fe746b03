package trip

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
)

// A part is what an example's default build leaves out, so that its first
// run does not wait for it to compile, and the build tag that compiles it
// in.
type part struct {
	what, tag string
	in        func() bool // whether this build has it
}

func (p *part) Error() string { return p.what + " are not compiled in" }

// parts are the parts a build can leave out, in the order their tags are
// given to go build.
var parts = []*part{
	{"the provider adapters", "providers", ProvidersCompiledIn},
	{"the durable stores", "stores", StoresCompiledIn},
}

var (
	// ErrNeedsProviders says the program must be built again with -tags
	// providers to use the model it was asked for.
	ErrNeedsProviders error = parts[0]
	// ErrNeedsStores says the program must be built again with -tags
	// stores to keep the run in the store it was asked for.
	ErrNeedsStores error = parts[1]
)

// Needs returns what this build lacks to plan with the model modelSpec
// names (ChooseModel) and keep the run in the store storeSpec names
// (OpenStore): ErrNeedsProviders, ErrNeedsStores, both joined, or nil. A
// spec it does not know is left for ChooseModel or OpenStore to refuse.
// Asked before anything runs, it lets one build again bring in all that a
// run needs.
func Needs(modelSpec, storeSpec string) error {
	var missing []error
	if wantsProvider(modelSpec) && !ProvidersCompiledIn() {
		missing = append(missing, ErrNeedsProviders)
	}
	if durable(storeSpec) && !StoresCompiledIn() {
		missing = append(missing, ErrNeedsStores)
	}
	return errors.Join(missing...)
}

// NeedsRebuild reports whether err says this build lacks a part:
// ErrNeedsProviders, ErrNeedsStores, or both joined.
func NeedsRebuild(err error) bool {
	return errors.Is(err, ErrNeedsProviders) || errors.Is(err, ErrNeedsStores)
}

// Rebuild builds the command whose package is in dir again, with the parts
// err says this build lacks (see NeedsRebuild) and those it has, and runs
// it with this process's arguments and standard streams until it exits; a
// signal that ends ctx is passed on to it as SIGTERM, so it shuts down as
// it would on its own. It returns nil once the command exits with success,
// and its *exec.ExitError once it exits with a failure, which the command
// has reported itself.
func Rebuild(ctx context.Context, dir string, err error) error {
	var missing, tags []string
	for _, p := range parts {
		switch {
		case errors.Is(err, p):
			missing = append(missing, p.what)
			tags = append(tags, p.tag)
		case p.in():
			tags = append(tags, p.tag)
		}
	}
	if missing == nil {
		return fmt.Errorf("nothing to build again for: %w", err)
	}
	what := strings.Join(missing, " and ")
	tmp, err := os.MkdirTemp("", "planexec-"+filepath.Base(dir)+"-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	bin := filepath.Join(tmp, filepath.Base(dir))
	log.Printf("building with %s (go build -tags %s); the first build takes a while", what, strings.Join(tags, ","))
	build := exec.CommandContext(ctx, "go", "build", "-tags", strings.Join(tags, ","), "-o", bin, ".")
	build.Dir = dir
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		return fmt.Errorf("building with %s: %v", what, err) // not an *exec.ExitError of the command's
	}
	cmd := exec.CommandContext(ctx, bin, os.Args[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	err = cmd.Run()
	if cmd.ProcessState != nil && cmd.ProcessState.Success() {
		return nil // even if ctx ended: it shut down as asked
	}
	return err
}
