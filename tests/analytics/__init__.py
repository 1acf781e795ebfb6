"""Delivery analytics: export, generator, the Spark report and its HTML, revalidation."""
