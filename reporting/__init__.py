"""The dataset report: motion statistics and the imitation judge's figures, printed, as JSON, a plot and a page."""
