package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/dpproxy/dpproxy/bounds"
	"github.com/dpproxy/dpproxy/conf"
)

const boundsUsage = `usage:
  dpproxy bounds [-config FILE] [-epsilon EPS | -exact] [-write] [-group-by COLS] [TABLE]
      measures each private table (or TABLE) and proposes max_rows_per_unit,
      max_groups_per_unit and clamping bounds, with the bias each candidate
      causes next to the noise it costs at the default ε.
  -epsilon EPS  DP measurement (default 1): EPS is recorded in the ledger
                (analyst @operator, actor bounds) before anything is read
  -exact        no noise and no charge: the figures are NOT protected
  -write        write the proposed bounds and their bias into FILE
                (comments and key order are kept)
  -group-by COLS  also measure groups per unit of these columns (comma-
                separated, [table.]column), e.g. keys without public_values
  -group-share G  price each candidate on an aggregate over a group holding
                a share G of the rows (default 0.1): its bias there against
                its noise; the proposal minimizes their sum
`

func boundsCmd(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("bounds", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	path := fs.String("config", "dpproxy.yaml", "configuration file")
	eps := fs.Float64("epsilon", 1, "operator ε for the DP measurement")
	exact := fs.Bool("exact", false, "measure without noise (unprotected; nothing charged)")
	write := fs.Bool("write", false, "write the proposal and its bias into the configuration file")
	groupShare := fs.Float64("group-share", bounds.DefaultGroupShare, "share of a table's rows each candidate is priced on")
	groupBy := fs.String("group-by", "", "further columns (comma-separated, [table.]column) whose groups per unit to measure")
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("%v\n%s", err, boundsUsage)
	}
	if fs.NArg() > 1 {
		return errors.New("bounds: at most one TABLE\n" + boundsUsage)
	}
	epsSet := false
	fs.Visit(func(f *flag.Flag) { epsSet = epsSet || f.Name == "epsilon" })
	if *exact && epsSet {
		return errors.New("bounds: -exact spends no ε: give -epsilon or -exact, not both")
	}
	cfg, err := conf.Load(*path)
	if err != nil {
		return fmt.Errorf("configuration is invalid:\n%w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	opts := bounds.Options{Table: fs.Arg(0), Epsilon: *eps, Exact: *exact, GroupShare: *groupShare}
	if *groupBy != "" {
		opts.GroupBy = strings.Split(*groupBy, ",")
	}
	props, err := bounds.Run(ctx, cfg, opts, out)
	if err != nil {
		return err
	}
	if !*write {
		fmt.Fprintf(out, "\nNot written: add -write to set these in %s.\n", *path)
		return nil
	}
	p := bounds.Provenance{Exact: *exact, Epsilon: *eps, At: time.Now().UTC().Format("2006-01-02")}
	if err := bounds.Write(*path, props, p); err != nil {
		return err
	}
	fmt.Fprintf(out, "\nWritten to %s: the bounds above and their bias (public metadata the NOTICE and EXPLAIN DP state).\n", *path)
	return nil
}
