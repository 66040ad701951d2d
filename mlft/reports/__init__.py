"""Reports: tables in the paper's layouts (terminal, markdown, CSV, TSV, LaTeX, JSON) and plots."""
