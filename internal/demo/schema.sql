DROP TABLE IF EXISTS public.orders, public.customers, public.products;

CREATE TABLE public.products (
    product_id integer PRIMARY KEY,
    name       text NOT NULL,
    category   text NOT NULL,
    price      numeric(10,2) NOT NULL
);

CREATE TABLE public.customers (
    customer_id integer PRIMARY KEY,
    name        text NOT NULL,
    region      text NOT NULL,
    signup_date date NOT NULL,
    age         integer NOT NULL
);

CREATE TABLE public.orders (
    order_id    bigserial PRIMARY KEY,
    customer_id integer NOT NULL REFERENCES public.customers,
    product_id  integer NOT NULL REFERENCES public.products,
    region      text NOT NULL,
    channel     text NOT NULL,
    quantity    integer NOT NULL,
    amount      numeric(10,2) NOT NULL,
    ordered_at  timestamptz NOT NULL
);

SELECT setseed(0.42);

INSERT INTO public.products
SELECT i,
       (ARRAY['Kettle','Lamp','Chair','Desk','Mug','Backpack','Headphones','Notebook','Blender','Scarf'])[1 + (i % 10)] || ' ' || i,
       (ARRAY['kitchen','home','office','travel','audio'])[1 + (i % 5)],
       round((5 + random() * 195)::numeric, 2)
FROM generate_series(1, 50) AS i;

INSERT INTO public.customers
SELECT i,
       'Customer ' || i,
       (ARRAY['north','south','east','west'])[1 + floor(random() * 4)::int],
       date '2022-01-01' + floor(random() * 1000)::int,
       18 + floor(random() * 62)::int
FROM generate_series(1, 2000) AS i;

-- Orders per customer follow a heavy tail: most customers order a handful
-- of times, a few order hundreds of times (the case contribution bounding
-- exists for).
INSERT INTO public.orders (customer_id, product_id, region, channel, quantity, amount, ordered_at)
SELECT c.customer_id,
       1 + floor(random() * 50)::int,
       c.region,
       (ARRAY['web','web','web','app','app','store'])[1 + floor(random() * 6)::int],
       1 + floor(random() * 4)::int,
       round((5 + random() * random() * 600)::numeric, 2),
       timestamptz '2024-01-01' + random() * interval '365 days'
FROM public.customers c,
     generate_series(1, CASE WHEN c.customer_id % 250 = 0 THEN 300
                             ELSE 1 + floor(random() * 16)::int END) AS n;

-- One customer alone orders by phone: a group key held by one person.
INSERT INTO public.orders (customer_id, product_id, region, channel, quantity, amount, ordered_at)
SELECT 7, 3, region, 'phone', 1, 42.00, timestamptz '2024-06-01'
FROM public.customers WHERE customer_id = 7;

ANALYZE public.products, public.customers, public.orders;

-- Marks the tables as the demo's own: demo.Load refuses to replace tables
-- of these names that lack it, so pointing the demo at a real database
-- cannot drop real data.
COMMENT ON TABLE public.products IS 'dpproxy demo data';
COMMENT ON TABLE public.customers IS 'dpproxy demo data';
COMMENT ON TABLE public.orders IS 'dpproxy demo data';
