// Package chart draws corral's charts in the browser with uPlot, for the
// self-contained HTML reports (sim, kraken) and the live dashboard of
// `corral up`: one toolkit, one look, one number format.
//
// A Chart is lines over a time axis built from Go data; Validate refuses
// bad data (NaN, infinities, series of the wrong length, times that do not
// increase) with an error naming the chart, the series and the point.
// Render returns a chart as an HTML <figure> with its data embedded,
// Inline the scripts and styles a self-contained page needs once in its
// <head>, and WritePage a whole page; most reports want WritePage, or
// Inline and Render inside their own template. A live page loads the
// assets from Handler (Links writes the tags), fetches Encode's JSON for
// a chart's first state and appends points with chart.js's handle.append.
//
// The assets are uPlot 1.6.32 from npm (assets/fetch-uplot.sh; MIT,
// assets/LICENSE.uPlot) and chart.js, corral's helper: SI tick labels at
// the values they label ("110 M", "1.2 k/s"), one prefix and one count of
// decimals per axis, legends below the plot with the values under the
// cursor, colour and dash per series, width following the page, drag to
// zoom.
//
// The package holds no mutable state; everything in it is safe for
// concurrent use.
package chart
