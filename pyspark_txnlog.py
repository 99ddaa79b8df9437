"""The ``txnlog`` Spark data source (DESIGN §1); Spark finds ``DefaultSource`` on its own."""
