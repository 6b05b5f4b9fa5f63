package main

import (
	"embed"
	"html/template"
	"io/fs"
	"net/http"

	"github.com/corralhq/corral/fleet"
	"github.com/corralhq/corral/internal/chart"
)

// dashboardFiles are the dashboard's page, script and styles, embedded
// with the chart toolkit's: the dashboard works offline.
//
//go:embed dashboard
var dashboardFiles embed.FS

var dashboardPage = template.Must(template.ParseFS(dashboardFiles, "dashboard/index.html"))

// servePage serves the dashboard.
func (u *up) servePage(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	_ = dashboardPage.Execute(w, struct {
		ChartLinks template.HTML
		Policies   []string
	}{chart.Links("/assets/chart/"), fleet.Switchable})
}

// assets serves the dashboard's files under /assets/dash/ and the chart
// toolkit's under /assets/chart/.
func assets() http.Handler {
	sub, _ := fs.Sub(dashboardFiles, "dashboard")
	mux := http.NewServeMux()
	mux.Handle("/assets/dash/", http.StripPrefix("/assets/dash/", http.FileServerFS(sub)))
	mux.Handle("/assets/chart/", http.StripPrefix("/assets/chart/", chart.Handler()))
	return mux
}
