"""The paper's running example (store, item, sales: Tables 1-3 of section 2), as Arrow tables.

rids are row positions, so store s_id 01 is rid 0, item i_id 01 is rid 0, sales t_id 01 is rid 0.
"""

import pyarrow as pa

STORE = pa.table({
    "s_id": [1, 2, 3, 4],
    "s_name": ["Target", "Target", "Macy's", "Macy's"],
    "city": ["Palo Alto", "Albany", "San Francisco", "New York City"],
    "state": ["CA", "NY", "CA", "NY"],
})
ITEM = pa.table({
    "i_id": [1, 2, 3, 4, 5],
    "i_name": ["binder", "pencil", "shirt", "pants", "pot"],
    "category": ["stationery", "stationery", "clothing", "clothing", "kitchenware"],
})
SALES = pa.table({
    "t_id": list(range(1, 12)),
    "s_id": [1, 1, 1, 2, 2, 2, 3, 3, 4, 4, 4],
    "i_id": [1, 2, 4, 1, 2, 4, 3, 4, 3, 4, 5],
    "price": [4, 1, 30, 5, 2, 35, 45, 60, 50, 70, 30],
    "num": [1000, 3000, 600, 800, 2000, 800, 1500, 600, 2100, 1200, 200],
})


def register(session) -> None:
    session.register("store", STORE)
    session.register("item", ITEM)
    session.register("sales", SALES)


SCHEMA = {
    "store": {"s_id": "BIGINT", "s_name": "VARCHAR", "city": "VARCHAR", "state": "VARCHAR"},
    "item": {"i_id": "BIGINT", "i_name": "VARCHAR", "category": "VARCHAR"},
    "sales": {"t_id": "BIGINT", "s_id": "BIGINT", "i_id": "BIGINT", "price": "BIGINT", "num": "BIGINT"},
}

# Q_1 of section 2.1 (rewritten by the paper as Q_3)
Q1 = """
SELECT d.s_name, i.i_name
FROM store d, item i, sales s
WHERE d.s_id = s.s_id AND i.i_id = s.i_id AND i.category = 'stationery'
"""

# Q_4 of section 2.2: stores and their sums of sales for categories sold more than 5000 units
Q4 = """
SELECT temp_tab.s_name, sum(total) AS total
FROM (
    SELECT d.s_name, i.category, sum(s.num) AS total
    FROM item i, store d, sales s
    WHERE s.s_id = d.s_id AND i.i_id = s.i_id
    GROUP BY d.s_name, i.category
    HAVING sum(s.num) > 5000
) AS temp_tab
GROUP BY temp_tab.s_name
"""

# Q_8 of section 3.4: items that sell more than 1500 units in store 01
Q8 = """
SELECT i_name FROM item
WHERE item.i_id IN (SELECT i_id FROM sales s WHERE s.s_id = 1 AND s.num > 1500)
"""
