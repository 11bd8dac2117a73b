package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"text/tabwriter"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
)

// printTable prints a resource list as `kubectl get` does: the API server renders the CRD's
// printer columns as a Table.
func printTable(ctx context.Context, out io.Writer, cfg *rest.Config, path string) error {
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(cfg.Host, "/")+path, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", path, resp.Status)
	}
	table := &metav1.Table{}
	if err := json.NewDecoder(resp.Body).Decode(table); err != nil {
		return err
	}
	w := tabwriter.NewWriter(out, 0, 4, 3, ' ', 0)
	var head []string
	for _, c := range table.ColumnDefinitions {
		if c.Priority == 0 {
			head = append(head, strings.ToUpper(c.Name))
		}
	}
	fmt.Fprintln(w, "  "+strings.Join(head, "\t"))
	for _, row := range table.Rows {
		var cells []string
		for i, c := range table.ColumnDefinitions {
			if c.Priority == 0 && i < len(row.Cells) {
				cells = append(cells, fmt.Sprint(row.Cells[i]))
			}
		}
		fmt.Fprintln(w, "  "+strings.Join(cells, "\t"))
	}
	return w.Flush()
}
